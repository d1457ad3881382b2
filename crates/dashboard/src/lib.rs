//! The built-in web dashboard (what rocketmq-dashboard shows and does, served by FerroMQ
//! itself): the pages, embedded in the binary, and the JSON API behind them, which follows
//! rocketmq-dashboard's REST paths and shapes (`/cluster/list.query`, `/topic/createOrUpdate.do`,
//! ... answering `{"status":0,"data":...,"errMsg":null}`) so scripts written for it keep working.
//!
//! Everything it shows comes from the name servers and brokers over the remoting protocol, with
//! the admin client, as rocketmq-dashboard does; the only state of its own is the recent TPS
//! history the collector samples for the charts.

mod api;
mod assets;
mod collector;
mod config;
mod error;
mod http;
mod server;
mod state;

pub use config::{DashboardConfig, DEFAULT_PORT, DEFAULT_TRACE_TOPIC};
pub use error::ApiError;
pub use server::{bind, serve, url};
pub use state::Dashboard;
