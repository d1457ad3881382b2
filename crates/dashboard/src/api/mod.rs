//! The JSON API at rocketmq-dashboard's paths. `.query` paths read; `.do` paths change
//! something and take POST only (so that a link or an image elsewhere cannot trigger them).

mod acl;
mod cluster;
mod consumer;
mod controller;
mod dashboard;
mod message;
mod ops;
mod producer;
mod shared;
mod topic;
mod trace;

use hyper::Method;
use serde_json::Value as JsonValue;

use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

const PREFIXES: [&str; 11] = [
    "/cluster/",
    "/topic/",
    "/consumer/",
    "/producer/",
    "/message/",
    "/dlqMessage/",
    "/messageTrace/",
    "/dashboard/",
    "/ops/",
    "/acl/",
    "/controller/",
];

/// Whether `path` belongs to the API (else it is a page asset or unknown).
pub(crate) fn is_api_path(path: &str) -> bool {
    PREFIXES.iter().any(|p| path.starts_with(p))
}

/// Runs the handler of `path`; its answer is the `data` of the success envelope.
///
/// # Errors
/// The handler's failure, an unknown path, or a change asked without POST.
pub(crate) async fn dispatch(
    d: &Dashboard,
    method: &Method,
    path: &str,
    r: &ApiRequest,
) -> Result<JsonValue, ApiError> {
    // rocketmq-dashboard's ACL page deletes with DELETE; every other change is a POST.
    if path.ends_with(".do") && method != Method::POST && method != Method::DELETE {
        return Err(ApiError::bad(format!("{path} changes the cluster: send it with POST")));
    }
    let data = match path {
        "/cluster/list.query" => cluster::list(d).await?,
        "/cluster/brokerConfig.query" => cluster::broker_config(d, r).await?,

        "/topic/list.query" => topic::list(d, r).await?,
        "/topic/list.queryTopicType" => topic::list_with_types(d).await?,
        "/topic/stats.query" => topic::stats(d, r).await?,
        "/topic/route.query" => topic::route(d, r).await?,
        "/topic/createOrUpdate.do" => topic::create_or_update(d, r).await?,
        "/topic/queryConsumerByTopic.query" => consumer::consume_stats_by_topic(d, r).await?,
        "/topic/queryTopicConsumerInfo.query" => topic::consumer_groups(d, r).await?,
        "/topic/examineTopicConfig.query" => topic::examine_config(d, r).await?,
        "/topic/sendTopicMessage.do" => topic::send_message(d, r).await?,
        "/topic/deleteTopic.do" => topic::delete(d, r).await?,
        "/topic/deleteTopicByBroker.do" => topic::delete_in_broker(d, r).await?,

        "/consumer/groupList.query" | "/consumer/group.refresh.all" => consumer::group_list(d, r).await?,
        "/consumer/group.query" | "/consumer/group.refresh" => consumer::group(d, r).await?,
        "/consumer/resetOffset.do" | "/consumer/skipAccumulate.do" => consumer::reset_offset(d, r).await?,
        "/consumer/examineSubscriptionGroupConfig.query" => consumer::examine_config(d, r).await?,
        "/consumer/deleteSubGroup.do" => consumer::delete(d, r).await?,
        "/consumer/createOrUpdate.do" => consumer::create_or_update(d, r).await?,
        "/consumer/fetchBrokerNameList.query" => consumer::broker_names(d, r).await?,
        "/consumer/queryTopicByConsumer.query" => consumer::consume_stats_by_group(d, r).await?,
        "/consumer/consumerConnection.query" => consumer::connection(d, r).await?,
        "/consumer/consumerRunningInfo.query" => consumer::running_info(d, r).await?,

        "/producer/producerConnection.query" => producer::connection(d, r).await?,

        "/message/viewMessage.query" => message::view(d, r, true).await?,
        "/messageTrace/viewMessage.query" => message::view(d, r, false).await?,
        "/message/queryMessagePageByTopic.query" => message::page_by_topic(d, r, false).await?,
        "/dlqMessage/queryDlqMessageByConsumerGroup.query" => message::page_by_topic(d, r, true).await?,
        "/message/queryMessageByTopicAndKey.query" => message::by_key(d, r).await?,
        "/message/queryMessageByTopic.query" => message::by_time(d, r).await?,
        "/message/consumeMessageDirectly.do" => message::consume_directly(d, r).await?,
        "/dlqMessage/batchResendDlqMessage.do" => message::batch_resend(d, r).await?,

        "/messageTrace/viewMessageTraceDetail.query" => trace::detail(d, r).await?,
        "/messageTrace/viewMessageTraceGraph.query" => trace::graph(d, r).await?,

        "/dashboard/series.query" => dashboard::series(d),
        "/dashboard/broker.query" => dashboard::broker(d, r)?,
        "/dashboard/topic.query" => dashboard::topic(d, r)?,
        "/dashboard/topicCurrent.query" => dashboard::topic_current(d),

        "/acl/users.query" => acl::users(d, r).await?,
        "/acl/acls.query" => acl::acls(d, r).await?,
        "/acl/createUser.do" => acl::put_user(d, r, false).await?,
        "/acl/updateUser.do" => acl::put_user(d, r, true).await?,
        "/acl/deleteUser.do" => acl::delete_user(d, r).await?,
        "/acl/createAcl.do" => acl::put_acl(d, r, false).await?,
        "/acl/updateAcl.do" => acl::put_acl(d, r, true).await?,
        "/acl/deleteAcl.do" => acl::delete_acl(d, r).await?,

        "/controller/state.query" => controller::state(d).await?,

        "/ops/homePage.query" => ops::home(d),
        "/ops/updateNameSvrAddr.do" => ops::update_namesrv(d, r).await?,
        "/ops/addNameSvrAddr.do" => ops::add_namesrv(d, r).await?,
        _ => return Err(ApiError::NotFound(format!("no API at {path}"))),
    };
    Ok(data)
}
