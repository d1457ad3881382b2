//! `ferromq admin <command>`: mqadmin's commands, names and flags, on top of
//! `ferromq_client::admin::AdminClient`. Each command prints a table like mqadmin's, or JSON
//! with `--json`. Commands live in one file per concept; this module parses and dispatches.

mod acl;
mod allocate;
mod auth;
mod broker;
mod browse;
mod consumer_status;
mod controller;
mod export;
mod export_cluster;
mod group;
mod ha;
mod message;
mod namesrv;
mod output;
mod send_rt;
mod static_topic;
mod stats;
mod topic;
mod trace;

use anyhow::Context;
use ferromq_client::admin::AdminClient;
use ferromq_protocol::request_code;

/// Arguments of `ferromq admin`.
#[derive(Debug, clap::Args)]
pub(crate) struct AdminArgs {
    /// Name server address list, `;`-separated (default: the NAMESRV_ADDR environment variable).
    #[arg(short = 'n', long = "namesrvAddr", global = true)]
    namesrv_addr: Option<String>,
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Sign requests with this access key (brokers with ACL on); give it before the command.
    #[arg(long = "accessKey", requires = "secret_key")]
    access_key: Option<String>,
    /// The secret key that goes with --accessKey.
    #[arg(long = "secretKey", requires = "access_key")]
    secret_key: Option<String>,
    /// Read the access and secret key from this file (mqadmin's conf/tools.yml format).
    /// Default: $ROCKETMQ_HOME/conf/tools.yml when it exists.
    #[arg(long = "credentialsFile", conflicts_with = "access_key")]
    credentials_file: Option<std::path::PathBuf>,
    /// Connect with TLS (mqadmin's `-Dtls.enable=true`): any server certificate is trusted
    /// unless the tls.client.* keys of /etc/rocketmq/tls.properties say otherwise.
    #[arg(long = "useTLS", global = true)]
    use_tls: bool,
    /// The mqadmin command.
    #[command(subcommand)]
    command: AdminCommand,
}

/// mqadmin's commands.
#[derive(Debug, clap::Subcommand)]
#[command(rename_all = "camelCase")]
enum AdminCommand {
    /// Create or update a topic on one broker (-b) or every master of a cluster (-c).
    UpdateTopic(topic::UpdateTopicArgs),
    /// Create a static topic, or grow it, with a fixed number of logic queues spread over
    /// brokers (-b names) or clusters (-c).
    UpdateStaticTopic(static_topic::UpdateStaticTopicArgs),
    /// Move a static topic's logic queues onto other brokers (-b names) or clusters (-c);
    /// their offsets stay readable.
    RemappingStaticTopic(static_topic::RemappingStaticTopicArgs),
    /// Create or update an ACL 1.0 account on one broker (-b) or every broker of a cluster (-c).
    UpdateAclConfig(acl::UpdateAclConfigArgs),
    /// Delete an ACL 1.0 account.
    DeleteAclConfig(acl::DeleteAclConfigArgs),
    /// Replace the global white remote addresses of a broker's ACL file.
    UpdateGlobalWhiteAddr(acl::UpdateGlobalWhiteAddrArgs),
    /// Show the version of each ACL file of a broker (-b) or of a cluster's brokers (-c).
    ClusterAclConfigVersion(acl::AclTarget),
    /// Show every ACL 1.0 account of a broker (admin accounts only).
    GetAclConfig(acl::AclTarget),
    /// Create an ACL 2.0 user on one broker (-b) or every broker of a cluster (-c).
    CreateUser(auth::UserArgs),
    /// Change an ACL 2.0 user's password, type or status.
    UpdateUser(auth::UserArgs),
    /// Delete an ACL 2.0 user and its ACL.
    DeleteUser(auth::UsernameArgs),
    /// Show an ACL 2.0 user.
    GetUser(auth::UsernameArgs),
    /// List ACL 2.0 users.
    ListUser(auth::ListUserArgs),
    /// Give a subject policy entries (merged into its ACL).
    CreateAcl(auth::AclArgs),
    /// Change a subject's policy entries (merged into its ACL).
    UpdateAcl(auth::AclArgs),
    /// Delete a subject's ACL, or some resources' entries.
    DeleteAcl(auth::DeleteAclArgs),
    /// Show a subject's ACL.
    GetAcl(auth::GetAclArgs),
    /// List ACLs.
    ListAcl(auth::ListAclArgs),
    /// Copy users from one broker to another.
    CopyUser(auth::CopyArgs),
    /// Copy ACLs from one broker to another.
    CopyAcl(auth::CopyArgs),
    /// Delete a topic from a cluster's brokers and from the name servers.
    DeleteTopic(topic::DeleteTopicArgs),
    /// List the topics the name server knows.
    TopicList(topic::TopicListArgs),
    /// Show the clusters whose brokers serve a topic.
    TopicClusterList(topic::TopicClusterListArgs),
    /// Show a topic's route.
    TopicRoute(topic::TopicRouteArgs),
    /// Show each queue's offsets of a topic.
    TopicStatus(topic::TopicStatusArgs),
    /// List the clusters, their brokers and addresses.
    ClusterList(broker::ClusterListArgs),
    /// Show a broker's runtime statistics.
    BrokerStatus(broker::BrokerTargetArgs),
    /// Show a broker's configuration.
    GetBrokerConfig(broker::BrokerTargetArgs),
    /// Change one setting of a broker (-b) or of every master of a cluster (-c).
    UpdateBrokerConfig(broker::UpdateBrokerConfigArgs),
    /// List every producer group's clients on a broker.
    Producer(broker::BrokerAddrArgs),
    /// Show every subscription group's progress on a broker.
    BrokerConsumeStats(broker::BrokerConsumeStatsArgs),
    /// Show each topic's put and get rates and today's message counts, per consumer group.
    StatsAll(stats::StatsAllArgs),
    /// Take a broker group's write permission away on every name server.
    WipeWritePerm(namesrv::BrokerNameArgs),
    /// Give a broker group its write permission back on every name server.
    AddWritePerm(namesrv::BrokerNameArgs),
    /// Show every name server's settings.
    GetNamesrvConfig,
    /// Destroy the consume queues whose messages retention removed.
    #[command(name = "cleanExpiredCQ")]
    CleanExpiredCq(broker::MaintenanceArgs),
    /// Delete the consume queues of topics no longer configured.
    CleanUnusedTopic(broker::MaintenanceArgs),
    /// Delete expired CommitLog files now, whatever the delete hour.
    DeleteExpiredCommitLog(broker::MaintenanceArgs),
    /// Create or update the topics of a JSON file on one broker (-b) or every master (-c).
    UpdateTopicList(ConfigListArgs),
    /// Create or update the subscription groups of a JSON file.
    UpdateSubGroupList(ConfigListArgs),
    /// Show a subscription group's settings on every master that has it.
    GetConsumerConfig(group::GetConsumerConfigArgs),
    /// Change a topic's permission on one broker (-b) or every master of a cluster (-c).
    UpdateTopicPerm(topic::UpdateTopicPermArgs),
    /// Write a broker's or a cluster's user topics and subscription groups to a JSON file.
    ExportMetadata(export::ExportMetadataArgs),
    /// Show the units of one consume queue.
    #[command(name = "queryCq")]
    QueryCq(topic::QueryCqArgs),
    /// Read, set or remove an ordered topic's queue layout on the name servers.
    UpdateOrderConf(topic::UpdateOrderConfArgs),
    /// Copy a consumer group's offsets on a topic to another group.
    CloneGroupOffset(group::CloneGroupOffsetArgs),
    /// Move a consumer group's offsets on a topic to the end.
    SkipAccumulatedMessage(group::SkipAccumulatedMessageArgs),
    /// Change one setting of every name server.
    UpdateNamesrvConfig(namesrv::KeyValueArgs),
    /// Create or update a KV config entry on every name server.
    UpdateKvConfig(namesrv::KvArgs),
    /// Delete a KV config entry from every name server.
    DeleteKvConfig(namesrv::KvArgs),
    /// Create or update a subscription group.
    UpdateSubGroup(group::UpdateSubGroupArgs),
    /// Make a group pull or pop a topic (server-side assignment), on one broker (-b) or every
    /// master of a cluster (-c).
    SetConsumeMode(group::SetConsumeModeArgs),
    /// Delete a subscription group.
    #[command(name = "deleteSubGroup")]
    DeleteSubGroup(group::DeleteSubGroupArgs),
    /// Show the replication state of a broker (-b) or of every master of a cluster (-c).
    HaStatus(ha::HaStatusArgs),
    /// Show a controller group's leader and peers (-a: any node).
    GetControllerMetaData(controller::ControllerAddrArgs),
    /// Show broker sets' masters, epochs and SyncStateSets from the controller.
    GetSyncStateSet(controller::SyncStateSetArgs),
    /// Show the epochs of each replica of a broker set (-b) or of a cluster's sets (-c).
    GetBrokerEpoch(controller::BrokerEpochArgs),
    /// Make a replica the master of its broker set (mqadmin's `-bn` is --brokerName).
    ElectMaster(controller::ElectMasterArgs),
    /// Make the controller forget replicas or a whole broker set (`-bn` is --brokerName).
    CleanBrokerMetadata(controller::CleanBrokerMetadataArgs),
    /// Show the settings of controller nodes (-a, `;`-separated).
    GetControllerConfig(controller::ControllerAddrArgs),
    /// Change one setting of controller nodes (-a, `;`-separated).
    UpdateControllerConfig(controller::UpdateControllerConfigArgs),
    /// Show a consumer group's progress on each queue (-g), or list every group with offsets.
    ConsumerProgress(group::ConsumerProgressArgs),
    /// Show a consumer group's online clients.
    ConsumerConnection(group::ConsumerConnectionArgs),
    /// Show a producer group's online clients.
    ProducerConnection(group::ProducerConnectionArgs),
    /// Show what each online consumer of a group reports about itself.
    ConsumerStatus(consumer_status::ConsumerStatusArgs),
    /// Move a consumer group's offsets to a point in time.
    ResetOffsetByTime(group::ResetOffsetByTimeArgs),
    /// Find messages by key.
    QueryMsgByKey(message::QueryMsgByKeyArgs),
    /// Find a message by its offset message id (or, with -t, its unique id).
    QueryMsgById(message::QueryMsgByIdArgs),
    /// Find a message by its unique id within a topic.
    QueryMsgByUniqueKey(message::QueryMsgByUniqueKeyArgs),
    /// Show the message at an offset of one queue.
    QueryMsgByOffset(message::QueryMsgByOffsetArgs),
    /// Send one message.
    SendMessage(message::SendMessageArgs),
    /// Pull messages of a topic and print them.
    ConsumeMessage(message::ConsumeMessageArgs),
    /// Print every message of a topic, queue by queue, over a time range.
    PrintMsg(browse::PrintMsgArgs),
    /// Print one queue's messages over a time range, or count them by tag.
    PrintMsgByQueue(browse::PrintMsgByQueueArgs),
    /// Show the store host and CommitLog offset inside offset message ids.
    DecodeMessageId(message::DecodeMessageIdArgs),
    /// Send test messages to a broker's own topic and print each send's RT.
    SendMsgStatus(send_rt::SendMsgStatusArgs),
    /// Measure each broker's send RT, for one cluster or all, every -i seconds.
    #[command(name = "clusterRT")]
    ClusterRt(send_rt::ClusterRtArgs),
    /// Show how the average strategy shares a topic's queues among client ids.
    #[command(name = "allocateMQ")]
    AllocateMq(allocate::AllocateMqArgs),
    /// Write a cluster's broker and name server settings to configs.json.
    ExportConfigs(export_cluster::ExportClusterArgs),
    /// Write a cluster's runtime figures (TPS, day counts, disk use) to metrics.json.
    ExportMetrics(export_cluster::ExportClusterArgs),
    /// Show a message's send and consume trace records from the trace topic.
    QueryMsgTraceById(trace::QueryMsgTraceByIdArgs),
}

/// What every command gets: the client and the output mode.
pub(crate) struct Ctx {
    pub(crate) client: AdminClient,
    pub(crate) json: bool,
}

/// Runs one admin command. A failure prints its whole cause chain on one line (no backtrace)
/// and exits with status 1, as mqadmin exits non-zero.
pub(crate) fn run(args: AdminArgs) -> anyhow::Result<()> {
    if let Err(e) = run_command(args) {
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
    Ok(())
}

fn run_command(args: AdminArgs) -> anyhow::Result<()> {
    let namesrv = args.namesrv_addr.or_else(|| std::env::var("NAMESRV_ADDR").ok()).filter(|s| !s.trim().is_empty());
    // The controller commands talk to the controller (-a); getSyncStateSet -c asks the name
    // server for the cluster's broker sets.
    let needs_namesrv = match &args.command {
        AdminCommand::GetSyncStateSet(a) => a.needs_namesrv(),
        AdminCommand::GetControllerMetaData(_)
        | AdminCommand::ElectMaster(_)
        | AdminCommand::CleanBrokerMetadata(_)
        | AdminCommand::GetControllerConfig(_)
        | AdminCommand::UpdateControllerConfig(_)
        | AdminCommand::DecodeMessageId(_) => false,
        _ => true,
    };
    let namesrv = match namesrv {
        Some(n) => n,
        None if !needs_namesrv => String::new(),
        None => anyhow::bail!("no name server address: give -n host:port or set NAMESRV_ADDR"),
    };
    let credentials = credentials(args.access_key, args.secret_key, args.credentials_file)?;
    let tls = crate::client_tls(args.use_tls)?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let remoting =
            ferromq_remoting::ClientConfig::default().with_zone_from_env().with_credentials(credentials).with_tls(tls);
        let ctx = Ctx { client: AdminClient::with_config(&namesrv, remoting), json: args.json };
        let result = dispatch(&ctx, args.command).await;
        ctx.client.shutdown().await;
        result
    })
}

/// The credentials requests are signed with: the flags, else the file given, else
/// `$ROCKETMQ_HOME/conf/tools.yml` when it exists (as mqadmin), else none.
pub(crate) fn credentials(
    access_key: Option<String>,
    secret_key: Option<String>,
    file: Option<std::path::PathBuf>,
) -> anyhow::Result<Option<ferromq_protocol::signature::SessionCredentials>> {
    if let (Some(ak), Some(sk)) = (access_key, secret_key) {
        return Ok(Some(ferromq_protocol::signature::SessionCredentials::new(ak, sk)));
    }
    let (path, required) = match file {
        Some(p) => (p, true),
        None => match std::env::var("ROCKETMQ_HOME") {
            Ok(home) if !home.trim().is_empty() => {
                (std::path::Path::new(&home).join(ferromq_auth::tools::TOOLS_FILE), false)
            }
            _ => return Ok(None),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read the credentials file {}", path.display())),
    };
    ferromq_auth::tools::parse_tools_credentials(&text)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("credentials file {}: {e}", path.display()))
}

async fn dispatch(ctx: &Ctx, command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::UpdateAclConfig(a) => acl::update_acl_config(ctx, a).await,
        AdminCommand::DeleteAclConfig(a) => acl::delete_acl_config(ctx, a).await,
        AdminCommand::UpdateGlobalWhiteAddr(a) => acl::update_global_white_addr(ctx, a).await,
        AdminCommand::ClusterAclConfigVersion(a) => acl::cluster_acl_config_version(ctx, a).await,
        AdminCommand::GetAclConfig(a) => acl::get_acl_config(ctx, a).await,
        AdminCommand::CreateUser(a) => auth::put_user(ctx, a, false).await,
        AdminCommand::UpdateUser(a) => auth::put_user(ctx, a, true).await,
        AdminCommand::DeleteUser(a) => auth::delete_user(ctx, a).await,
        AdminCommand::GetUser(a) => auth::get_user(ctx, a).await,
        AdminCommand::ListUser(a) => auth::list_user(ctx, a).await,
        AdminCommand::CreateAcl(a) => auth::put_acl(ctx, a, false).await,
        AdminCommand::UpdateAcl(a) => auth::put_acl(ctx, a, true).await,
        AdminCommand::DeleteAcl(a) => auth::delete_acl(ctx, a).await,
        AdminCommand::GetAcl(a) => auth::get_acl(ctx, a).await,
        AdminCommand::ListAcl(a) => auth::list_acl(ctx, a).await,
        AdminCommand::CopyUser(a) => auth::copy_users(ctx, a).await,
        AdminCommand::CopyAcl(a) => auth::copy_acls(ctx, a).await,
        AdminCommand::UpdateTopic(a) => topic::update_topic(ctx, a).await,
        AdminCommand::UpdateStaticTopic(a) => static_topic::update_static_topic(ctx, a).await,
        AdminCommand::RemappingStaticTopic(a) => static_topic::remapping_static_topic(ctx, a).await,
        AdminCommand::DeleteTopic(a) => topic::delete_topic(ctx, a).await,
        AdminCommand::TopicList(a) => topic::topic_list(ctx, a).await,
        AdminCommand::TopicClusterList(a) => topic::topic_cluster_list(ctx, a).await,
        AdminCommand::TopicRoute(a) => topic::topic_route(ctx, a).await,
        AdminCommand::TopicStatus(a) => topic::topic_status(ctx, a).await,
        AdminCommand::ClusterList(a) => broker::cluster_list(ctx, a).await,
        AdminCommand::BrokerStatus(a) => broker::broker_status(ctx, a).await,
        AdminCommand::GetBrokerConfig(a) => broker::get_broker_config(ctx, a).await,
        AdminCommand::UpdateBrokerConfig(a) => broker::update_broker_config(ctx, a).await,
        AdminCommand::Producer(a) => broker::producer(ctx, a).await,
        AdminCommand::BrokerConsumeStats(a) => broker::broker_consume_stats(ctx, a).await,
        AdminCommand::StatsAll(a) => stats::stats_all(ctx, a).await,
        AdminCommand::WipeWritePerm(a) => namesrv::change_write_perm(ctx, a, false).await,
        AdminCommand::AddWritePerm(a) => namesrv::change_write_perm(ctx, a, true).await,
        AdminCommand::GetNamesrvConfig => namesrv::get_namesrv_config(ctx).await,
        AdminCommand::CleanExpiredCq(a) => {
            broker::store_maintenance(ctx, a, request_code::CLEAN_EXPIRED_CONSUMEQUEUE).await
        }
        AdminCommand::CleanUnusedTopic(a) => broker::store_maintenance(ctx, a, request_code::CLEAN_UNUSED_TOPIC).await,
        AdminCommand::DeleteExpiredCommitLog(a) => {
            broker::store_maintenance(ctx, a, request_code::DELETE_EXPIRED_COMMITLOG).await
        }
        AdminCommand::UpdateTopicList(a) => topic::update_topic_list(ctx, a).await,
        AdminCommand::UpdateSubGroupList(a) => group::update_sub_group_list(ctx, a).await,
        AdminCommand::GetConsumerConfig(a) => group::get_consumer_config(ctx, a).await,
        AdminCommand::UpdateTopicPerm(a) => topic::update_topic_perm(ctx, a).await,
        AdminCommand::QueryCq(a) => topic::query_cq(ctx, a).await,
        AdminCommand::ExportMetadata(a) => export::export_metadata(ctx, a).await,
        AdminCommand::UpdateOrderConf(a) => topic::update_order_conf(ctx, a).await,
        AdminCommand::CloneGroupOffset(a) => group::clone_group_offset(ctx, a).await,
        AdminCommand::SkipAccumulatedMessage(a) => group::skip_accumulated_message(ctx, a).await,
        AdminCommand::UpdateNamesrvConfig(a) => namesrv::update_namesrv_config(ctx, a).await,
        AdminCommand::UpdateKvConfig(a) => namesrv::update_kv_config(ctx, a).await,
        AdminCommand::DeleteKvConfig(a) => namesrv::delete_kv_config(ctx, a).await,
        AdminCommand::UpdateSubGroup(a) => group::update_sub_group(ctx, a).await,
        AdminCommand::SetConsumeMode(a) => group::set_consume_mode(ctx, a).await,
        AdminCommand::DeleteSubGroup(a) => group::delete_sub_group(ctx, a).await,
        AdminCommand::HaStatus(a) => ha::ha_status(ctx, a).await,
        AdminCommand::GetControllerMetaData(a) => controller::get_controller_metadata(ctx, a).await,
        AdminCommand::GetSyncStateSet(a) => controller::get_sync_state_set(ctx, a).await,
        AdminCommand::GetBrokerEpoch(a) => controller::get_broker_epoch(ctx, a).await,
        AdminCommand::ElectMaster(a) => controller::elect_master(ctx, a).await,
        AdminCommand::CleanBrokerMetadata(a) => controller::clean_broker_metadata(ctx, a).await,
        AdminCommand::GetControllerConfig(a) => controller::get_controller_config(ctx, a).await,
        AdminCommand::UpdateControllerConfig(a) => controller::update_controller_config(ctx, a).await,
        AdminCommand::ConsumerProgress(a) => group::consumer_progress(ctx, a).await,
        AdminCommand::ConsumerConnection(a) => group::consumer_connection(ctx, a).await,
        AdminCommand::ProducerConnection(a) => group::producer_connection(ctx, a).await,
        AdminCommand::ConsumerStatus(a) => consumer_status::consumer_status(ctx, a).await,
        AdminCommand::ResetOffsetByTime(a) => group::reset_offset_by_time(ctx, a).await,
        AdminCommand::QueryMsgByKey(a) => message::query_msg_by_key(ctx, a).await,
        AdminCommand::QueryMsgById(a) => message::query_msg_by_id(ctx, a).await,
        AdminCommand::QueryMsgByUniqueKey(a) => message::query_msg_by_unique_key(ctx, a).await,
        AdminCommand::QueryMsgByOffset(a) => message::query_msg_by_offset(ctx, a).await,
        AdminCommand::SendMessage(a) => message::send_message(ctx, a).await,
        AdminCommand::ConsumeMessage(a) => message::consume_message(ctx, a).await,
        AdminCommand::PrintMsg(a) => browse::print_msg(ctx, a).await,
        AdminCommand::PrintMsgByQueue(a) => browse::print_msg_by_queue(ctx, a).await,
        AdminCommand::DecodeMessageId(a) => message::decode_message_id(ctx, a),
        AdminCommand::SendMsgStatus(a) => send_rt::send_msg_status(ctx, a).await,
        AdminCommand::ClusterRt(a) => send_rt::cluster_rt(ctx, a).await,
        AdminCommand::AllocateMq(a) => allocate::allocate_mq(ctx, a).await,
        AdminCommand::ExportConfigs(a) => export_cluster::export_configs(ctx, a).await,
        AdminCommand::ExportMetrics(a) => export_cluster::export_metrics(ctx, a).await,
        AdminCommand::QueryMsgTraceById(a) => trace::query_msg_trace_by_id(ctx, a).await,
    }
}

/// The arguments of the list commands (updateTopicList, updateSubGroupList): where to send
/// and the JSON file of configs.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigListArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// A JSON file holding an array of configs.
    #[arg(short = 'f', long = "filename")]
    file: std::path::PathBuf,
}

impl ConfigListArgs {
    /// The configs of the file, read as a JSON array of `what`, and the brokers to send them
    /// to; no broker is looked up for an empty file.
    pub(crate) async fn load<T: serde::de::DeserializeOwned>(
        &self,
        ctx: &Ctx,
        what: &str,
    ) -> anyhow::Result<(Vec<T>, Vec<(String, String)>)> {
        let text = std::fs::read(&self.file)
            .with_context(|| format!("the file path {} does not exists", self.file.display()))?;
        let items: Vec<T> = ferromq_protocol::json::parse_lenient(&text)
            .with_context(|| format!("{} is not a JSON array of {what}", self.file.display()))?;
        if items.is_empty() {
            return Ok((items, Vec::new()));
        }
        let targets = target_brokers(ctx, self.broker_addr.as_deref(), self.cluster.as_deref()).await?;
        Ok((items, targets))
    }
}

/// The brokers a command addresses: the one at `-b`, or every master of cluster `-c`.
pub(crate) async fn target_brokers(
    ctx: &Ctx,
    broker_addr: Option<&str>,
    cluster: Option<&str>,
) -> anyhow::Result<Vec<(String, String)>> {
    if let Some(addr) = broker_addr {
        return Ok(vec![(addr.to_owned(), addr.to_owned())]);
    }
    let Some(cluster) = cluster else {
        anyhow::bail!("give a broker address (-b) or a cluster name (-c)");
    };
    let masters = ctx.client.master_addrs(cluster).await?;
    if masters.is_empty() {
        anyhow::bail!("cluster {cluster} has no master broker (asked {})", ctx.client.namesrv_addrs().join(";"));
    }
    Ok(masters)
}
