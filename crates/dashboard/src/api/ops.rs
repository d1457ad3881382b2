//! Ops page: the name servers the dashboard talks to.

use std::sync::PoisonError;

use serde_json::{json, Value as JsonValue};

use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// `/ops/homePage.query`: the current name server list, as rocketmq-dashboard spells it.
pub(crate) fn home(d: &Dashboard) -> JsonValue {
    let current = d.admin().namesrv_addrs().join(";");
    let known = d.known_namesrvs.lock().unwrap_or_else(PoisonError::into_inner).clone();
    json!({ "currentNamesrv": current, "namesvrAddrList": known, "useVIPChannel": false, "useTLS": d.config().client.tls.is_some() })
}

fn checked(list: &str) -> Result<String, ApiError> {
    let addrs: Vec<&str> = list.split(';').map(str::trim).filter(|a| !a.is_empty()).collect();
    if addrs.is_empty() {
        return Err(ApiError::bad("namesrvAddr can not be blank"));
    }
    for a in &addrs {
        let valid = a.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid {
            return Err(ApiError::bad(format!("{a:?} is not a host:port name server address")));
        }
    }
    Ok(addrs.join(";"))
}

/// `/ops/updateNameSvrAddr.do?nameSvrAddrList=`: talk to these name servers from now on.
pub(crate) async fn update_namesrv(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let list = checked(r.required("nameSvrAddrList")?)?;
    d.remember_namesrv(&list);
    let old = d.switch_namesrv(&list);
    old.shutdown().await;
    Ok(JsonValue::Bool(true))
}

/// `/ops/addNameSvrAddr.do?newNamesrvAddr=`: offer another name server list to switch to.
pub(crate) async fn add_namesrv(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let addr = checked(r.param("newNamesrvAddr").unwrap_or_default())?;
    d.remember_namesrv(&addr);
    Ok(JsonValue::Bool(true))
}
