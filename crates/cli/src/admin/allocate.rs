//! `allocateMQ`: how the average strategy would share a topic's readable queues among the
//! given client ids, printed as mqadmin's `RebalanceResult` JSON. Nothing is changed on any
//! server. Java: `tools/command/topic/AllocateMQSubCommand`.

use std::collections::BTreeMap;

use anyhow::Context;
use ferromq_client::admin::json;
use ferromq_client::{allocate_averagely, MessageQueue};

use crate::admin::output::print_json;
use crate::admin::Ctx;

#[derive(Debug, clap::Args)]
pub(crate) struct AllocateMqArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Client ids (usually ips), comma-separated.
    #[arg(short = 'i', long = "ipList")]
    ip_list: String,
}

pub(crate) async fn allocate_mq(ctx: &Ctx, a: AllocateMqArgs) -> anyhow::Result<()> {
    let client_ids: Vec<String> =
        a.ip_list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    if client_ids.is_empty() {
        anyhow::bail!("give the client ids to allocate among with -i (comma-separated)");
    }
    let route = ctx.client.topic_route(&a.topic).await.with_context(|| format!("no route for topic {}", a.topic))?;
    let queues: Vec<MessageQueue> = route.subscribe_queues(&a.topic).into_iter().map(|(mq, _)| mq).collect();
    let result = allocation(&queues, &client_ids);
    let value = json!({ "result": result });
    if ctx.json {
        return print_json(&value);
    }
    // mqadmin prints the JSON on one line.
    println!("{value}");
    Ok(())
}

/// Each client's queues. Queues and clients are sorted first, as a consumer's rebalance sorts
/// them, so the answer is the one a real group of these clients would reach.
fn allocation(queues: &[MessageQueue], client_ids: &[String]) -> BTreeMap<String, Vec<MessageQueue>> {
    client_ids.iter().map(|cid| (cid.clone(), allocate_averagely(queues, client_ids, cid))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(broker: &str, queue_id: i32) -> MessageQueue {
        MessageQueue { topic: "T".into(), broker_name: broker.into(), queue_id }
    }

    #[test]
    fn five_queues_over_two_clients_give_the_first_one_more() {
        let queues: Vec<MessageQueue> = (0..5).map(|i| mq("broker-a", i)).collect();
        let clients = vec!["10.0.0.2".to_owned(), "10.0.0.1".to_owned()];
        let result = allocation(&queues, &clients);
        assert_eq!(result["10.0.0.1"], [mq("broker-a", 0), mq("broker-a", 1), mq("broker-a", 2)]);
        assert_eq!(result["10.0.0.2"], [mq("broker-a", 3), mq("broker-a", 4)]);
    }
}
