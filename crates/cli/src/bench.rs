//! `ferromq bench`: the load tool (being written).

/// Arguments of `ferromq bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// Mode and options.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
}

/// Runs the load tool.
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("the load tool is not available yet: {:?}", args.args)
}
