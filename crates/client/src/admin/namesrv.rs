//! Name-server calls: routes, cluster layout, topic lists, topic deletion, broker write
//! permission, the name server's settings and its KV config.
//! Java: `MQClientAPIImpl#getTopicRouteInfoFromNameServer` and friends.

use std::collections::{BTreeMap, BTreeSet};

use ferromq_protocol::body::{ClusterInfo, TopicList, TopicRouteData};
use ferromq_protocol::header::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader, DeleteKvConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader, GetKvConfigRequestHeader, GetKvConfigResponseHeader,
    GetRouteInfoRequestHeader, GetTopicsByClusterRequestHeader, PutKvConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
use ferromq_protocol::{properties_text, request_code, response_code, RemotingCommand};

use crate::admin::client::{decode_header, AdminClient};
use crate::admin::error::AdminError;

impl AdminClient {
    /// GET_ROUTEINFO_BY_TOPIC: which brokers serve `topic`.
    ///
    /// # Errors
    /// TOPIC_NOT_EXIST and transport failures, naming the name server asked.
    pub async fn topic_route(&self, topic: &str) -> Result<TopicRouteData, AdminError> {
        let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: Some(true) };
        self.call_namesrv_body(RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(&header))
            .await
    }

    /// GET_BROKER_CLUSTER_INFO: every broker group and its cluster.
    ///
    /// # Errors
    /// Transport failures, naming the name server asked.
    pub async fn cluster_info(&self) -> Result<ClusterInfo, AdminError> {
        self.call_namesrv_body(RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO)).await
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the name server knows.
    ///
    /// # Errors
    /// Transport failures, naming the name server asked.
    pub async fn topic_list(&self) -> Result<TopicList, AdminError> {
        self.call_namesrv_body(RemotingCommand::request(request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).await
    }

    /// GET_TOPICS_BY_CLUSTER: the topics on a cluster's brokers.
    ///
    /// # Errors
    /// Transport failures, naming the name server asked.
    pub async fn topics_by_cluster(&self, cluster: &str) -> Result<TopicList, AdminError> {
        let header = GetTopicsByClusterRequestHeader { cluster: cluster.to_owned() };
        self.call_namesrv_body(RemotingCommand::request(request_code::GET_TOPICS_BY_CLUSTER).with_header(&header)).await
    }

    /// DELETE_TOPIC_IN_NAMESRV on every name server.
    ///
    /// # Errors
    /// The first name server that fails.
    pub async fn delete_topic_in_namesrv(&self, topic: &str, cluster: Option<&str>) -> Result<(), AdminError> {
        if self.namesrv_addrs().is_empty() {
            return Err(AdminError::NoNamesrv);
        }
        let header =
            DeleteTopicFromNamesrvRequestHeader { topic: topic.to_owned(), cluster_name: cluster.map(str::to_owned) };
        for addr in self.namesrv_addrs() {
            let request = RemotingCommand::request(request_code::DELETE_TOPIC_IN_NAMESRV).with_header(&header);
            self.call_ok(addr, request).await?;
        }
        Ok(())
    }

    /// The master addresses of a cluster's broker groups, sorted by broker name.
    ///
    /// # Errors
    /// As [`cluster_info`](Self::cluster_info).
    pub async fn master_addrs(&self, cluster: &str) -> Result<Vec<(String, String)>, AdminError> {
        let info = self.cluster_info().await?;
        let mut out = Vec::new();
        for name in info.cluster_addr_table.get(cluster).into_iter().flatten() {
            if let Some(addr) = info.broker_addr_table.get(name).and_then(|b| b.master_addr()) {
                out.push((name.clone(), addr.to_owned()));
            }
        }
        Ok(out)
    }

    /// Every address (masters and slaves) of a cluster's brokers, as (broker name, address),
    /// sorted by broker name then broker id.
    ///
    /// # Errors
    /// As [`cluster_info`](Self::cluster_info).
    pub async fn all_broker_addrs(&self, cluster: &str) -> Result<Vec<(String, String)>, AdminError> {
        let info = self.cluster_info().await?;
        let mut out = Vec::new();
        for name in info.cluster_addr_table.get(cluster).into_iter().flatten() {
            if let Some(group) = info.broker_addr_table.get(name) {
                out.extend(group.broker_addrs.values().map(|addr| (name.clone(), addr.clone())));
            }
        }
        Ok(out)
    }

    /// The clusters whose brokers serve `topic`: each broker group of the topic's route looked
    /// up in the cluster table. Java: `DefaultMQAdminExt#getTopicClusterList`.
    ///
    /// # Errors
    /// As [`topic_route`](Self::topic_route) and [`cluster_info`](Self::cluster_info).
    pub async fn topic_cluster_list(&self, topic: &str) -> Result<BTreeSet<String>, AdminError> {
        let route = self.topic_route(topic).await?;
        let info = self.cluster_info().await?;
        let mut clusters = BTreeSet::new();
        for broker in &route.broker_datas {
            for (cluster, names) in &info.cluster_addr_table {
                if names.contains(&broker.broker_name) {
                    clusters.insert(cluster.clone());
                }
            }
        }
        Ok(clusters)
    }

    /// Every broker group's preferred address (the master, else the lowest slave) in the
    /// route of `topic`, as (broker name, address).
    ///
    /// # Errors
    /// As [`topic_route`](Self::topic_route).
    pub async fn route_brokers(&self, topic: &str) -> Result<Vec<(String, String)>, AdminError> {
        let route = self.topic_route(topic).await?;
        Ok(route_brokers(&route))
    }

    /// WIPE_WRITE_PERM_OF_BROKER on the name server at `namesrv`: the broker group's queues
    /// lose write permission there; returns how many topics changed.
    ///
    /// # Errors
    /// The name server's refusal and transport failures, naming `namesrv`.
    pub async fn wipe_write_perm(&self, namesrv: &str, broker_name: &str) -> Result<i32, AdminError> {
        let header = WipeWritePermOfBrokerRequestHeader { broker_name: broker_name.to_owned() };
        let response = self
            .call_ok(namesrv, RemotingCommand::request(request_code::WIPE_WRITE_PERM_OF_BROKER).with_header(&header))
            .await?;
        Ok(decode_header::<WipeWritePermOfBrokerResponseHeader>(namesrv, "WIPE_WRITE_PERM_OF_BROKER", &response)?
            .wipe_topic_count)
    }

    /// ADD_WRITE_PERM_OF_BROKER on the name server at `namesrv`: the broker group's queues
    /// get read and write permission back; returns how many topics changed.
    ///
    /// # Errors
    /// The name server's refusal and transport failures, naming `namesrv`.
    pub async fn add_write_perm(&self, namesrv: &str, broker_name: &str) -> Result<i32, AdminError> {
        let header = AddWritePermOfBrokerRequestHeader { broker_name: broker_name.to_owned() };
        let response = self
            .call_ok(namesrv, RemotingCommand::request(request_code::ADD_WRITE_PERM_OF_BROKER).with_header(&header))
            .await?;
        Ok(decode_header::<AddWritePermOfBrokerResponseHeader>(namesrv, "ADD_WRITE_PERM_OF_BROKER", &response)?
            .add_topic_count)
    }

    /// GET_NAMESRV_CONFIG: the name server's settings as `key=value` lines.
    ///
    /// # Errors
    /// Transport failures, naming `namesrv`.
    pub async fn namesrv_config(&self, namesrv: &str) -> Result<Vec<(String, String)>, AdminError> {
        self.call_properties(namesrv, RemotingCommand::request(request_code::GET_NAMESRV_CONFIG)).await
    }

    /// UPDATE_NAMESRV_CONFIG: changes settings of the name server at `namesrv`.
    ///
    /// # Errors
    /// The name server's refusal and transport failures, naming `namesrv`.
    pub async fn update_namesrv_config(
        &self,
        namesrv: &str,
        entries: &BTreeMap<String, String>,
    ) -> Result<(), AdminError> {
        let body = properties_text::to_text(entries.iter());
        self.call_ok(
            namesrv,
            RemotingCommand::request(request_code::UPDATE_NAMESRV_CONFIG).with_body(body.into_bytes()),
        )
        .await
        .map(drop)
    }

    /// GET_KV_CONFIG: a KV entry, from the first name server that answers; `None` when it
    /// has no such entry.
    ///
    /// # Errors
    /// Transport failures, naming the name servers asked.
    pub async fn kv_config(&self, namespace: &str, key: &str) -> Result<Option<String>, AdminError> {
        let header = GetKvConfigRequestHeader { namespace: namespace.to_owned(), key: key.to_owned() };
        let request = RemotingCommand::request(request_code::GET_KV_CONFIG).with_header(&header);
        match self.call_namesrv(request).await {
            Ok((addr, response)) => {
                Ok(decode_header::<GetKvConfigResponseHeader>(&addr, "GET_KV_CONFIG", &response)?.value)
            }
            Err(AdminError::Response { code: response_code::QUERY_NOT_FOUND, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// PUT_KV_CONFIG on every name server.
    ///
    /// # Errors
    /// The first refusal or transport failure, naming its name server.
    pub async fn put_kv_config(&self, namespace: &str, key: &str, value: &str) -> Result<(), AdminError> {
        let header =
            PutKvConfigRequestHeader { namespace: namespace.to_owned(), key: key.to_owned(), value: value.to_owned() };
        for addr in self.namesrv_addrs() {
            self.call_ok(addr, RemotingCommand::request(request_code::PUT_KV_CONFIG).with_header(&header)).await?;
        }
        Ok(())
    }

    /// DELETE_KV_CONFIG on every name server.
    ///
    /// # Errors
    /// The first refusal or transport failure, naming its name server.
    pub async fn delete_kv_config(&self, namespace: &str, key: &str) -> Result<(), AdminError> {
        let header = DeleteKvConfigRequestHeader { namespace: namespace.to_owned(), key: key.to_owned() };
        for addr in self.namesrv_addrs() {
            self.call_ok(addr, RemotingCommand::request(request_code::DELETE_KV_CONFIG).with_header(&header)).await?;
        }
        Ok(())
    }
}

/// (broker name, preferred address) of each broker group in `route`.
pub(crate) fn route_brokers(route: &TopicRouteData) -> Vec<(String, String)> {
    route
        .broker_datas
        .iter()
        .filter_map(|b| b.select_broker_addr().map(|addr| (b.broker_name.clone(), addr.to_owned())))
        .collect()
}
