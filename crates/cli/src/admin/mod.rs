//! `ferromq admin <command>`: mqadmin's commands (being written).

/// Arguments of `ferromq admin`.
#[derive(Debug, clap::Args)]
pub(crate) struct AdminArgs {
    /// The mqadmin command and its flags.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
}

/// Runs one admin command.
pub(crate) fn run(args: AdminArgs) -> anyhow::Result<()> {
    anyhow::bail!("admin commands are not available yet: {:?}", args.args)
}
