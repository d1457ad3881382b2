//! `Dashboard`: the admin client the API calls through, its settings, and the TPS history the
//! collector keeps for the charts.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use ferromq_client::admin::AdminClient;

use crate::collector::History;
use crate::config::DashboardConfig;

/// The dashboard's shared state.
#[derive(Debug)]
pub struct Dashboard {
    config: DashboardConfig,
    /// Replaced when the name server list is changed on the Ops page.
    admin: RwLock<Arc<AdminClient>>,
    pub(crate) history: Mutex<History>,
    /// Name server lists offered on the Ops page (the first one given at start).
    pub(crate) known_namesrvs: Mutex<Vec<String>>,
}

impl Dashboard {
    /// A dashboard for the cluster `config` names.
    pub fn new(config: DashboardConfig) -> Self {
        let admin = Arc::new(admin_for(&config, &config.namesrv_addr));
        let known = vec![config.namesrv_addr.clone()];
        Dashboard {
            config,
            admin: RwLock::new(admin),
            history: Mutex::new(History::default()),
            known_namesrvs: Mutex::new(known),
        }
    }

    /// The settings.
    pub fn config(&self) -> &DashboardConfig {
        &self.config
    }

    /// The admin client of the current name server list.
    pub(crate) fn admin(&self) -> Arc<AdminClient> {
        self.admin.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Talks to `namesrv_addr` (`;`-separated) from now on; returns the client replaced.
    pub(crate) fn switch_namesrv(&self, namesrv_addr: &str) -> Arc<AdminClient> {
        let admin = Arc::new(admin_for(&self.config, namesrv_addr));
        std::mem::replace(&mut *self.admin.write().unwrap_or_else(PoisonError::into_inner), admin)
    }

    /// Adds `list` to the name server lists offered, if new.
    pub(crate) fn remember_namesrv(&self, list: &str) {
        /// Lists kept at most (the oldest added is dropped).
        const KNOWN_MAX: usize = 32;
        let mut known = self.known_namesrvs.lock().unwrap_or_else(PoisonError::into_inner);
        if !known.iter().any(|k| k == list) {
            if known.len() == KNOWN_MAX {
                known.remove(1);
            }
            known.push(list.to_owned());
        }
    }

    /// Closes the admin connections.
    pub async fn shutdown(&self) {
        self.admin().shutdown().await;
    }
}

fn admin_for(config: &DashboardConfig, namesrv_addr: &str) -> AdminClient {
    AdminClient::with_config(namesrv_addr, config.client.clone()).with_timeout(config.timeout)
}
