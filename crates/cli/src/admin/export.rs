//! `exportMetadata`: the user topics and subscription groups of a broker (-b) or of a
//! cluster's masters (-c, queue counts summed over the masters), written as JSON files for
//! migrating or auditing a cluster. Java: `tools/command/export/ExportMetadataCommand`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ferromq_broker::metadata::{is_predefined_group, is_retry_or_dlq_topic, is_sys_consumer_group, is_system_topic};
use ferromq_client::admin::{json, json_to_string_pretty, JsonMap, JsonValue};
use ferromq_protocol::body::{perm, SubscriptionGroupConfig, TopicConfig};

use crate::admin::output::print_json;
use crate::admin::{target_brokers, Ctx};

#[derive(Debug, clap::Args)]
pub(crate) struct ExportMetadataArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Directory the file goes to.
    #[arg(short = 'f', long = "filePath", default_value = "/tmp/rocketmq/export")]
    file_path: PathBuf,
    /// Only the topics (topic.json).
    #[arg(short = 't', long = "topic")]
    topic: bool,
    /// Only the subscription groups (subscriptionGroup.json).
    #[arg(short = 'g', long = "subscriptionGroup")]
    subscription_group: bool,
    /// Keep the %RETRY% and %DLQ% topics.
    #[arg(short = 's', long = "specialTopic")]
    special_topic: bool,
}

pub(crate) async fn export_metadata(ctx: &Ctx, a: ExportMetadataArgs) -> anyhow::Result<()> {
    let (file_name, content) = match (a.broker_addr.as_deref(), a.cluster.as_deref()) {
        (Some(addr), _) => {
            if a.topic {
                let mut wrapper = ctx.client.all_topic_config(addr).await?;
                let system = ctx.client.broker_system_topics(addr).await?.topic_list;
                wrapper
                    .topic_config_table
                    .retain(|name, config| !system.contains(name) && is_user_topic(config, a.special_topic));
                ("topic.json", json!(wrapper))
            } else if a.subscription_group {
                let mut wrapper = ctx.client.all_subscription_groups(addr).await?;
                wrapper.subscription_group_table.retain(|name, _| is_user_group(name));
                ("subscriptionGroup.json", json!(wrapper))
            } else {
                anyhow::bail!("with -b, give -t (topics) or -g (subscription groups)");
            }
        }
        (None, Some(cluster)) => {
            let mut topics: BTreeMap<String, TopicConfig> = BTreeMap::new();
            let mut groups: BTreeMap<String, SubscriptionGroupConfig> = BTreeMap::new();
            for (_, addr) in target_brokers(ctx, None, Some(cluster)).await? {
                let system = ctx.client.broker_system_topics(&addr).await?.topic_list;
                for (name, mut config) in ctx.client.all_topic_config(&addr).await?.topic_config_table {
                    if system.contains(&name) || !is_user_topic(&config, a.special_topic) {
                        continue;
                    }
                    // The cluster's queues of a topic are the sum of each master's.
                    if let Some(seen) = topics.get(&name) {
                        config.read_queue_nums += seen.read_queue_nums;
                        config.write_queue_nums += seen.write_queue_nums;
                    }
                    topics.insert(name, config);
                }
                for (name, mut config) in ctx.client.all_subscription_groups(&addr).await?.subscription_group_table {
                    if !is_user_group(&name) {
                        continue;
                    }
                    if let Some(seen) = groups.get(&name) {
                        config.retry_queue_nums += seen.retry_queue_nums;
                    }
                    groups.insert(name, config);
                }
            }
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
            let mut result = JsonMap::new();
            if !a.subscription_group {
                result.insert("topicConfigTable".into(), json!(topics));
            }
            if !a.topic {
                result.insert("subscriptionGroupTable".into(), json!(groups));
            }
            result.insert("exportTime".into(), json!(now));
            let name = match (a.topic, a.subscription_group) {
                (true, _) => "topic.json",
                (false, true) => "subscriptionGroup.json",
                (false, false) => "metadata.json",
            };
            (name, JsonValue::Object(result))
        }
        (None, None) => anyhow::bail!("give a broker address (-b) or a cluster name (-c)"),
    };
    let path = a.file_path.join(file_name);
    write_file(&path, &json_to_string_pretty(&content)?)?;
    if ctx.json {
        return print_json(&json!({ "file": path.display().to_string() }));
    }
    println!("export {} success", path.display());
    Ok(())
}

/// Java's `getUserTopicConfig`: no system topics, no retry or dead-letter topics unless asked,
/// no topic with an invalid permission.
pub(crate) fn is_user_topic(config: &TopicConfig, special_topic: bool) -> bool {
    !is_system_topic(&config.topic_name)
        && (special_topic || !is_retry_or_dlq_topic(&config.topic_name))
        && perm::is_valid(config.perm)
}

/// Java's `getUserSubscriptionGroup`: no `CID_RMQ_SYS_*` and no predefined group.
pub(crate) fn is_user_group(name: &str) -> bool {
    !is_sys_consumer_group(name) && !is_predefined_group(name)
}

pub(crate) fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
