//! Dashboard page: the TPS history the collector keeps, in FerroMQ's chart shape
//! (`series.query`) and in rocketmq-dashboard's (`broker.query`, `topic.query`,
//! `topicCurrent.query`: points as `"ms,value,..."` strings, for scripts written for it).

use std::sync::PoisonError;

use serde_json::{json, Map, Value as JsonValue};

use crate::collector::{now_ms, TopicPoint};
use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// `/dashboard/series.query`: `{"intervalMs", "brokers": {"name:id": [[ms, putTps, getTps]]},
/// "topics": {topic: [[ms, inTps, outTps, inDay, outDay]]}, "topicsNotCharted"}`.
pub(crate) fn series(d: &Dashboard) -> JsonValue {
    let history = d.history.lock().unwrap_or_else(PoisonError::into_inner);
    let brokers: Map<String, JsonValue> = history
        .brokers
        .iter()
        .map(|(k, s)| {
            let points: Vec<JsonValue> = s.put.iter().zip(&s.get).map(|(p, g)| json!([p.0, p.1, g.1])).collect();
            (k.clone(), JsonValue::Array(points))
        })
        .collect();
    let topics: Map<String, JsonValue> = history
        .topics
        .iter()
        .map(|(t, s)| {
            let points: Vec<JsonValue> =
                s.iter().map(|p| json!([p.at, p.in_tps, p.out_tps, p.in_day, p.out_day])).collect();
            (t.clone(), JsonValue::Array(points))
        })
        .collect();
    let interval_ms = u64::try_from(d.config().collect_interval.as_millis()).unwrap_or(u64::MAX);
    json!({ "intervalMs": interval_ms, "brokers": brokers, "topics": topics,
            "topicsNotCharted": history.topics_not_charted })
}

/// Whether `date` (`yyyy-MM-dd`) is today (UTC): only today's points are kept.
fn is_today(r: &ApiRequest) -> Result<bool, ApiError> {
    let date = r.required("date")?;
    let valid = date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-';
    if !valid {
        return Err(ApiError::bad(format!("date must be yyyy-MM-dd, not {date:?}")));
    }
    let days = now_ms().div_euclid(86_400_000);
    let (y, m, d) = ferromq_protocol::civil_date::civil_from_days(days);
    Ok(date == format!("{y:04}-{m:02}-{d:02}"))
}

/// rocketmq-dashboard's topic point: `ms,inTps,inMsgCntToday,outTps,outMsgCntToday`.
fn topic_point(p: &TopicPoint) -> String {
    format!("{},{:.5},{},{:.5},{}", p.at, p.in_tps, p.in_day, p.out_tps, p.out_day)
}

/// `/dashboard/broker.query?date=`: `{"name:id": ["ms,getTps", ...]}` (rocketmq-dashboard
/// charts the brokers' get TPS); `{}` for another day than today.
pub(crate) fn broker(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    if !is_today(r)? {
        return Ok(json!({}));
    }
    let history = d.history.lock().unwrap_or_else(PoisonError::into_inner);
    let out: Map<String, JsonValue> = history
        .brokers
        .iter()
        .map(|(k, s)| (k.clone(), json!(s.get.iter().map(|(at, v)| format!("{at},{v:.5}")).collect::<Vec<_>>())))
        .collect();
    Ok(JsonValue::Object(out))
}

/// `/dashboard/topic.query?date=&topicName=`: every topic's points, or one topic's (`null`
/// when it is not charted).
pub(crate) fn topic(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let today = is_today(r)?;
    let history = d.history.lock().unwrap_or_else(PoisonError::into_inner);
    let points =
        |t: &str| history.topics.get(t).filter(|_| today).map(|s| json!(s.iter().map(topic_point).collect::<Vec<_>>()));
    if let Some(name) = r.param("topicName").map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(points(name).unwrap_or(JsonValue::Null));
    }
    let out: Map<String, JsonValue> = history.topics.keys().filter_map(|t| points(t).map(|p| (t.clone(), p))).collect();
    Ok(JsonValue::Object(out))
}

/// `/dashboard/topicCurrent.query`: `["topic,outMsgCntToday", ...]` from each topic's last point.
pub(crate) fn topic_current(d: &Dashboard) -> JsonValue {
    let history = d.history.lock().unwrap_or_else(PoisonError::into_inner);
    let out: Vec<String> =
        history.topics.iter().filter_map(|(t, s)| s.back().map(|p| format!("{t},{}", p.out_day))).collect();
    json!(out)
}
