//! `BrokerConfig`: the broker's own settings under RocketMQ's `broker.conf` keys (Java:
//! `BrokerConfig`, `NettyServerConfig`), and [`BrokerSettings`], which reads one `broker.conf`
//! into the broker's and the store's settings together, as the Java broker does.

use std::path::Path;

use ferromq_config::{rocketmq_config, ConfigError, RocketMqConfig};
use ferromq_protocol::MAX_FRAME_BYTES;
use ferromq_store::StoreConfig;

/// Bytes of a pull answer's frame kept for everything but the message bodies: the record
/// fields around each body (topic, up to 32 KiB of properties, fixed fields) and the header.
pub const PULL_FRAME_RESERVE: usize = 128 * 1024;

/// The most message bytes one pull answer carries: a remoting frame (16 MiB, Java's
/// `frameMaxLength`) less the reserve.
pub const PULL_BODY_BYTES_MAX: usize = MAX_FRAME_BYTES - PULL_FRAME_RESERVE;

/// The largest `maxMessageSize` whose messages a consumer can always pull back: one stored
/// record with the reserve around it fills a pull answer's frame.
pub const MAX_MESSAGE_SIZE_LIMIT: u64 = PULL_BODY_BYTES_MAX as u64;

/// Refuses a `maxMessageSize` above [`MAX_MESSAGE_SIZE_LIMIT`]: a message that large would be
/// stored and acknowledged, and then no pull could carry it (the consumer stuck there).
///
/// # Errors
/// The reason, naming the key and the limit.
pub fn check_max_message_size(bytes: u64) -> Result<(), String> {
    if bytes > MAX_MESSAGE_SIZE_LIMIT {
        return Err(format!(
            "maxMessageSize={bytes} is larger than a consumer can pull back in one {MAX_FRAME_BYTES}-byte remoting \
             frame; set maxMessageSize to at most {MAX_MESSAGE_SIZE_LIMIT}"
        ));
    }
    Ok(())
}

/// A broker's replication role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerRole {
    /// Master; replicas follow asynchronously.
    AsyncMaster,
    /// Master; a put waits for a replica.
    SyncMaster,
    /// Replica; refuses writes.
    Slave,
}

impl ferromq_config::ConfigValue for BrokerRole {
    const EXPECTED: &'static str = "ASYNC_MASTER, SYNC_MASTER or SLAVE";
    fn parse_value(text: &str) -> Option<Self> {
        match text {
            "ASYNC_MASTER" => Some(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Some(BrokerRole::SyncMaster),
            "SLAVE" => Some(BrokerRole::Slave),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        }
        .to_owned()
    }
}

/// The first non-loopback IPv4 address would be Java's default `brokerIP1`; without a network
/// query dependency FerroMQ defaults to loopback, and operators set `brokerIP1` as with Java.
fn default_broker_ip() -> String {
    "127.0.0.1".to_owned()
}

rocketmq_config! {
    /// The broker's settings. Field docs name the RocketMQ key.
    pub struct BrokerConfig {
        /// `brokerClusterName`.
        broker_cluster_name: String = "brokerClusterName", default "DefaultCluster".to_owned();
        /// `brokerName`.
        broker_name: String = "brokerName", default "broker-a".to_owned();
        /// `brokerId`: 0 for the master.
        broker_id: i64 = "brokerId", default 0;
        /// `namesrvAddr`: `;`-separated name servers (also `NAMESRV_ADDR` in the environment).
        namesrv_addr: String = "namesrvAddr", default std::env::var("NAMESRV_ADDR").unwrap_or_default();
        /// `listenPort`.
        listen_port: u16 = "listenPort", default 10911;
        /// `bindAddress` (Java 5's `NettyServerConfig`): the address the main, VIP and HA ports
        /// listen on.
        bind_address: String = "bindAddress", default "0.0.0.0".to_owned();
        /// `proxyProtocolTrustedAddresses` (FerroMQ): the load balancers (addresses and CIDR
        /// blocks, comma-separated) whose PROXY protocol headers are believed; empty: a
        /// connection opening with one is closed (Java believes anyone's).
        proxy_protocol_trusted_addresses: String = "proxyProtocolTrustedAddresses", default String::new();
        /// `brokerConfigPath`: where UPDATE_BROKER_CONFIG writes the settings back. Empty
        /// means the `-c` file the broker started from, else `<storePathRootDir>/config/broker.properties`.
        broker_config_path: String = "brokerConfigPath", default String::new();
        /// `brokerIP1`: the address registered with name servers.
        broker_ip1: String = "brokerIP1", default default_broker_ip();
        /// `brokerIP2`: the HA address host.
        broker_ip2: String = "brokerIP2", default default_broker_ip();
        /// `brokerRole`.
        broker_role: BrokerRole = "brokerRole", default BrokerRole::AsyncMaster;
        /// `brokerPermission` (PermName bits).
        broker_permission: i32 = "brokerPermission", default 6;
        /// `autoCreateTopicEnable`.
        auto_create_topic_enable: bool = "autoCreateTopicEnable", default true;
        /// `autoCreateSubscriptionGroup`.
        auto_create_subscription_group: bool = "autoCreateSubscriptionGroup", default true;
        /// `defaultTopicQueueNums`.
        default_topic_queue_nums: i32 = "defaultTopicQueueNums", default 8;
        /// `clusterTopicEnable`.
        cluster_topic_enable: bool = "clusterTopicEnable", default true;
        /// `validateSystemTopicWhenUpdateTopic`: admin requests may not create, change or
        /// delete system topics (TBW102, SCHEDULE_TOPIC_XXXX, `rmq_sys_*`, the cluster and
        /// broker name topics, ...).
        validate_system_topic_when_update_topic: bool = "validateSystemTopicWhenUpdateTopic", default true;
        /// `enableMixedMessageType`: whether a topic may be given `message.type=MIXED`.
        enable_mixed_message_type: bool = "enableMixedMessageType", default false;
        /// `brokerTopicEnable`.
        broker_topic_enable: bool = "brokerTopicEnable", default true;
        /// `longPollingEnable`.
        long_polling_enable: bool = "longPollingEnable", default true;
        /// `shortPollingTimeMills`.
        short_polling_time_mills: u64 = "shortPollingTimeMills", default 1000;
        /// `registerNameServerPeriod` (ms).
        register_name_server_period: u64 = "registerNameServerPeriod", default 30_000;
        /// `compressedRegister`.
        compressed_register: bool = "compressedRegister", default false;
        /// `forceRegister`: the periodic registration sends the whole topic table even when
        /// the name server already has its data version (false: ask QUERY_DATA_VERSION first
        /// and send it only to name servers whose version differs).
        force_register: bool = "forceRegister", default true;
        /// `registerBrokerTimeoutMills`.
        register_broker_timeout_mills: u64 = "registerBrokerTimeoutMills", default 24_000;
        /// `brokerNotActiveTimeoutMillis`: heartbeat timeout announced to name servers.
        broker_not_active_timeout_millis: i64 = "brokerNotActiveTimeoutMillis", default 10_000;
        /// `regionId`.
        region_id: String = "regionId", default "DefaultRegion".to_owned();
        /// `traceOn`.
        trace_on: bool = "traceOn", default true;
        /// `traceTopicEnable`: create and serve the message-trace topic (`msgTraceTopicName`,
        /// one queue) that clients with trace enabled send their trace records to.
        trace_topic_enable: bool = "traceTopicEnable", default false;
        /// `msgTraceTopicName`.
        msg_trace_topic_name: String = "msgTraceTopicName", default "RMQ_SYS_TRACE_TOPIC".to_owned();
        /// `filterServerNums` (4.x): filter-server processes to start. FerroMQ runs none (it
        /// evaluates filters in the broker); only 0 is accepted, as 4.x's default.
        filter_server_nums: u32 = "filterServerNums", default 0;
        /// `useTLS`: whether the broker's own client connections (to name servers, its master
        /// and controllers) use TLS. They also do with `tls.enable=true` or
        /// `tls.server.mode=enforcing` (Java's `BrokerStartup` default).
        use_tls: bool = "useTLS", default false;
        /// `storeReplyMessageEnable`: a request-reply reply is stored as well as pushed to the
        /// requester.
        store_reply_message_enable: bool = "storeReplyMessageEnable", default true;
        /// `slaveReadEnable`.
        slave_read_enable: bool = "slaveReadEnable", default false;
        /// `enablePropertyFilter`: serve SQL92 subscriptions.
        enable_property_filter: bool = "enablePropertyFilter", default false;
        /// `enableCalcFilterBitMap`: store the SQL92 bloom-filter bitmap of each message (needs
        /// the store's `enableConsumeQueueExt`).
        enable_calc_filter_bit_map: bool = "enableCalcFilterBitMap", default false;
        /// `expectConsumerNumUseFilter`: bloom filter sizing.
        expect_consumer_num_use_filter: i32 = "expectConsumerNumUseFilter", default 32;
        /// `maxErrorRateOfBloomFilter` (%): bloom filter sizing.
        max_error_rate_of_bloom_filter: i32 = "maxErrorRateOfBloomFilter", default 20;
        /// `recallMessageEnable`: serve RECALL_MESSAGE (cancel a pending timer message).
        recall_message_enable: bool = "recallMessageEnable", default false;
        /// `allowRecallWhenBrokerNotWriteable`.
        allow_recall_when_broker_not_writeable: bool = "allowRecallWhenBrokerNotWriteable", default true;
        /// `rejectTransactionMessage`: refuse half (prepared) messages with NO_PERMISSION.
        reject_transaction_message: bool = "rejectTransactionMessage", default false;
        /// `transactionCheckInterval` (ms) between two runs of the check-back service.
        transaction_check_interval: u64 = "transactionCheckInterval", default 30_000;
        /// `transactionTimeOut` (ms): age of a half message before its producer is asked.
        transaction_time_out: i64 = "transactionTimeOut", default 6_000;
        /// `transactionCheckMax`: check-backs before a half message is discarded.
        transaction_check_max: i32 = "transactionCheckMax", default 15;
        /// `transactionOpMsgMaxSize` (bytes): largest body of one op (done-marker) message.
        transaction_op_msg_max_size: usize = "transactionOpMsgMaxSize", default 4_096;
        /// `maxReconsumeTimes` default for groups without their own.
        max_reconsume_times: i32 = "maxReconsumeTimes", default 16;
        /// `sendThreadPoolQueueCapacity`: sends waiting for the store before SYSTEM_BUSY.
        send_thread_pool_queue_capacity: usize = "sendThreadPoolQueueCapacity", default 10_000;
        /// `pullThreadPoolQueueCapacity`: parked pulls before SYSTEM_BUSY.
        pull_thread_pool_queue_capacity: usize = "pullThreadPoolQueueCapacity", default 100_000;
        /// `flushConsumerOffsetInterval` (ms).
        flush_consumer_offset_interval: u64 = "flushConsumerOffsetInterval", default 5_000;
        /// `slaveSyncInterval` (ms) between two metadata syncs of a slave from its master
        /// (FerroMQ key; Java 4.x hard-codes 10 s).
        slave_sync_interval: u64 = "slaveSyncInterval", default 10_000;
        /// `serverChannelMaxIdleTimeSeconds`.
        server_channel_max_idle_time_seconds: u64 = "serverChannelMaxIdleTimeSeconds", default 120;
        /// `serverMaxConnections` (FerroMQ): connections the broker's ports serve at once; a
        /// new one beyond it is closed at once (Java has no bound). At least 1.
        server_max_connections: usize = "serverMaxConnections", default 10_000;
        /// `serverMaxConnectionsPerAddress` (FerroMQ): connections one client address may hold
        /// at once, so one host cannot take every slot; raise it for many clients behind one
        /// NAT or load balancer address. At least 1.
        server_max_connections_per_address: usize = "serverMaxConnectionsPerAddress", default 1_000;
        // POP consumption (`../shared/reference/pop-consumption.md` section 14).
        /// `reviveQueueNum`: queues of the revive topic, one revive task each.
        revive_queue_num: i32 = "reviveQueueNum", default 8;
        /// `reviveInterval` (ms) between two revive rounds of a revive queue.
        revive_interval: u64 = "reviveInterval", default 1_000;
        /// `reviveMaxSlow`: idle rounds after which a revive queue is looked at less often.
        revive_max_slow: u32 = "reviveMaxSlow", default 3;
        /// `reviveScanTime` (ms): longest scan of one revive round.
        revive_scan_time: u64 = "reviveScanTime", default 10_000;
        /// `enablePopLog`: log every pop, ack and revive at info level.
        enable_pop_log: bool = "enablePopLog", default false;
        /// `enablePopBufferMerge`: keep each pop's checkpoint in memory for a while, where acks
        /// only mark bits; a batch acknowledged in time writes no record at all. A crash makes
        /// the buffered pops' messages (acknowledged or not) come back: their offsets are
        /// committed only once the checkpoint is stored or fully acknowledged.
        enable_pop_buffer_merge: bool = "enablePopBufferMerge", default false;
        /// `popCkStayBufferTime` (ms): how long a checkpoint waits in the buffer (at most half
        /// its invisible time).
        pop_ck_stay_buffer_time: i64 = "popCkStayBufferTime", default 10_000;
        /// `popCkMaxBufferSize`: checkpoints in the buffer, at most; past it they are written at
        /// once.
        pop_ck_max_buffer_size: usize = "popCkMaxBufferSize", default 200_000;
        /// `enablePopBatchAck`: accepted for compatibility; FerroMQ always merges the acks it
        /// writes into batch-ack records when several arrive together.
        enable_pop_batch_ack: bool = "enablePopBatchAck", default false;
        /// `popPollingSize`: parked pops per `topic@group@queueId` before POLLING_FULL.
        pop_polling_size: usize = "popPollingSize", default 1_024;
        /// `popPollingMapSize`: distinct `topic@group@queueId` keys with parked pops.
        pop_polling_map_size: usize = "popPollingMapSize", default 100_000;
        /// `maxPopPollingSize`: parked pops and notifications in all before POLLING_FULL.
        max_pop_polling_size: usize = "maxPopPollingSize", default 100_000;
        /// `popLongPollingForceNotifyInterval`: every this many queue offsets an arrival wakes
        /// parked pops whatever their filter.
        pop_long_polling_force_notify_interval: i64 = "popLongPollingForceNotifyInterval", default 800;
        /// `enableNotifyAfterPopOrderLockRelease`: wake parked FIFO pops when a queue unblocks.
        enable_notify_after_pop_order_lock_release: bool = "enableNotifyAfterPopOrderLockRelease", default true;
        /// `initPopOffsetByCheckMsgInMem`: a MAX-init group whose queue still starts at 0 in
        /// memory starts at 0 rather than the end.
        init_pop_offset_by_check_msg_in_mem: bool = "initPopOffsetByCheckMsgInMem", default true;
        /// `enableRetryTopicV2`: new pop retries go to `%RETRY%group+topic` (else
        /// `%RETRY%group_topic`).
        enable_retry_topic_v2: bool = "enableRetryTopicV2", default false;
        /// `retrieveMessageFromPopRetryTopicV1`: with V2 on, keep draining the V1 retry topic.
        retrieve_message_from_pop_retry_topic_v1: bool = "retrieveMessageFromPopRetryTopicV1", default true;
        /// `popFromRetryProbability` (percent): how often a pop reads the retry topic first.
        pop_from_retry_probability: u32 = "popFromRetryProbability", default 20;
        /// `popResponseReturnActualRetryTopic`: serve retried messages under their retry topic
        /// name instead of the original topic.
        pop_response_return_actual_retry_topic: bool = "popResponseReturnActualRetryTopic", default false;
        /// `enablePopMessageThreshold`: skip queues with `popInflightMessageThreshold` messages
        /// popped and not acknowledged.
        enable_pop_message_threshold: bool = "enablePopMessageThreshold", default false;
        /// `popInflightMessageThreshold`.
        pop_inflight_message_threshold: i64 = "popInflightMessageThreshold", default 10_000;
        /// `skipWhenCKRePutReachMaxTimes`: drop a checkpoint whose revive failed more often than
        /// the re-put table is long (else it is retried at the table's last interval).
        skip_when_ck_re_put_reach_max_times: bool = "skipWhenCKRePutReachMaxTimes", default false;
        /// `serverLoadBalancerEnable`: QUERY_ASSIGNMENT allocates queues among the clients.
        server_load_balancer_enable: bool = "serverLoadBalancerEnable", default true;
        /// `defaultMessageRequestMode`: PULL or POP for groups without a mode of their own.
        default_message_request_mode: String = "defaultMessageRequestMode", default "PULL".to_owned();
        /// `defaultPopShareQueueNum`.
        default_pop_share_queue_num: i32 = "defaultPopShareQueueNum", default -1;
        // Access control (`../shared/reference/acl-and-tls.md`).
        /// `rocketmqHome`: the directory of `conf/plain_acl.yml` and `conf/acl/`; defaults to
        /// `$ROCKETMQ_HOME`, else the working directory.
        rocketmq_home: String = "rocketmqHome", default std::env::var("ROCKETMQ_HOME").unwrap_or_default();
        /// `aclEnable`: ACL 1.0, every request checked against the accounts of
        /// `<rocketmqHome>/conf/plain_acl.yml` and `<rocketmqHome>/conf/acl/*.yml`.
        acl_enable: bool = "aclEnable", default false;
        /// `authenticationEnabled`: ACL 2.0, every request must be signed by a user of the
        /// broker's user store.
        authentication_enabled: bool = "authenticationEnabled", default false;
        /// `authenticationProvider`: blank or Java's default class; FerroMQ has the one.
        authentication_provider: String = "authenticationProvider", default String::new();
        /// `authenticationMetadataProvider`: blank or Java's local provider class: the users
        /// in `<storePathRootDir>/config/users.json`.
        authentication_metadata_provider: String = "authenticationMetadataProvider", default String::new();
        /// `authenticationStrategy`: blank, Java's stateless or stateful strategy class (the
        /// decision is the same; FerroMQ checks every request).
        authentication_strategy: String = "authenticationStrategy", default String::new();
        /// `authenticationWhitelist`: comma-separated request codes not authenticated.
        authentication_whitelist: String = "authenticationWhitelist", default String::new();
        /// `initAuthenticationUser`: JSON `{"username":..,"password":..}` created as a SUPER
        /// user at start if absent.
        init_authentication_user: String = "initAuthenticationUser", default String::new();
        /// `innerClientAuthenticationCredentials`: JSON `{"accessKey":..,"secretKey":..}`: a
        /// SUPER user created at start if absent, whose keys sign the broker's own requests
        /// (to name servers, its master, the controller).
        inner_client_authentication_credentials: String = "innerClientAuthenticationCredentials", default String::new();
        /// `authorizationEnabled`: ACL 2.0 policies decide what each user may do.
        authorization_enabled: bool = "authorizationEnabled", default false;
        /// `authorizationProvider`: blank or Java's default class.
        authorization_provider: String = "authorizationProvider", default String::new();
        /// `authorizationMetadataProvider`: blank or Java's local provider class: the ACLs in
        /// `<storePathRootDir>/config/acls.json`.
        authorization_metadata_provider: String = "authorizationMetadataProvider", default String::new();
        /// `authorizationStrategy`: as `authenticationStrategy`.
        authorization_strategy: String = "authorizationStrategy", default String::new();
        /// `authorizationWhitelist`: comma-separated request codes not authorized.
        authorization_whitelist: String = "authorizationWhitelist", default String::new();
        /// `migrateAuthFromV1Enabled`: at start, import the ACL 1.0 accounts of
        /// `plain_acl.yml` as users and ACLs (users already present are left alone).
        migrate_auth_from_v1_enabled: bool = "migrateAuthFromV1Enabled", default false;
        // Controller mode (`../shared/reference/controller-mode.md` section 7.2).
        /// `enableControllerMode`: the controller group decides the role; `brokerId` and
        /// `brokerRole` are ignored.
        enable_controller_mode: bool = "enableControllerMode", default false;
        /// `controllerAddr`: `;`-separated controller addresses.
        controller_addr: String = "controllerAddr", default String::new();
        /// `controllerHeartBeatTimeoutMills`: sent in each heartbeat; the controller counts the
        /// broker dead after this long without one.
        controller_heart_beat_timeout_mills: u64 = "controllerHeartBeatTimeoutMills", default 10_000;
        /// `brokerHeartbeatInterval` (ms).
        broker_heartbeat_interval: u64 = "brokerHeartbeatInterval", default 1_000;
        /// `sendHeartbeatTimeoutMillis` (ms): the timeout of each controller request.
        send_heartbeat_timeout_millis: u64 = "sendHeartbeatTimeoutMillis", default 1_000;
        /// `syncBrokerMetadataPeriod` (ms): how often the role is checked with the controller.
        sync_broker_metadata_period: u64 = "syncBrokerMetadataPeriod", default 5_000;
        /// `checkSyncStateSetPeriod` (ms): how often a master reviews its SyncStateSet.
        check_sync_state_set_period: u64 = "checkSyncStateSetPeriod", default 5_000;
        /// `brokerElectionPriority`: lower wins elections between equal replicas.
        broker_election_priority: i32 = "brokerElectionPriority", default i32::MAX;
        /// `storePathBrokerIdentity`: empty means `<storePathRootDir>/brokerIdentity`.
        store_path_broker_identity: String = "storePathBrokerIdentity", default String::new();
        /// `storePathEpochFile`: empty means `<storePathRootDir>/epochFileCheckpoint`.
        store_path_epoch_file: String = "storePathEpochFile", default String::new();
    }
}

impl BrokerConfig {
    /// `ip:port` registered with name servers.
    pub fn broker_addr(&self) -> String {
        format!("{}:{}", self.broker_ip1, self.listen_port)
    }

    /// Name server addresses.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrv_addr.split(';').map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect()
    }
}

/// A `broker.conf` read into the broker's and the store's settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrokerSettings {
    /// Broker settings.
    pub broker: BrokerConfig,
    /// Store settings.
    pub store: StoreConfig,
    /// Replication settings (`ha*`, `slaveTimeout`, `inSyncReplicas` ...).
    pub ha: ferromq_replication::HaConfig,
    /// Metrics export (`metricsExporterType`, `metricsPromExporterPort` ...).
    pub metrics: ferromq_metrics::MetricsConfig,
}

impl BrokerSettings {
    /// Applies one key to whichever settings own it. Returns `Ok(false)` for a key neither uses.
    ///
    /// # Errors
    /// A value of the wrong type.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        if self.broker.set(key, value)? {
            return Ok(true);
        }
        self.broker.unknown.remove(key);
        if self.store.set(key, value)? {
            return Ok(true);
        }
        self.store.unknown.remove(key);
        if self.ha.set(key, value)? {
            return Ok(true);
        }
        self.ha.unknown.remove(key);
        if self.metrics.set(key, value)? {
            return Ok(true);
        }
        // Keep unknown keys once, on the broker side, for echoing back.
        self.metrics.unknown.remove(key);
        self.broker.unknown.insert(key.to_owned(), value.to_owned());
        Ok(false)
    }

    /// Applies properties text; returns unknown keys. Nothing is applied if any value is bad.
    ///
    /// # Errors
    /// Every problem found.
    pub fn apply_text(&mut self, text: &str) -> Result<Vec<String>, ConfigError> {
        let entries = ferromq_config::properties_text::parse(text)
            .map_err(|e| ConfigError::Invalid { path: None, reason: e.to_string() })?;
        let mut updated = self.clone();
        let mut unknown = Vec::new();
        let mut problems = Vec::new();
        for (k, v) in entries {
            match updated.set(&k, &v) {
                Ok(true) => {}
                Ok(false) => unknown.push(k),
                Err(e) => problems.push(e.to_string()),
            }
        }
        if !problems.is_empty() {
            return Err(ConfigError::Invalid { path: None, reason: problems.join("; ") });
        }
        *self = updated;
        Ok(unknown)
    }

    /// Loads a `broker.conf` file over the current values; returns unknown keys.
    ///
    /// # Errors
    /// Unreadable file or bad values.
    pub fn load_file(&mut self, path: &Path) -> Result<Vec<String>, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        self.apply_text(&text).map_err(|e| match e {
            ConfigError::Invalid { reason, .. } => ConfigError::Invalid { path: Some(path.to_owned()), reason },
            other => other,
        })
    }

    /// The `tls.*` settings: the keys of `broker.conf` (kept among the unknown keys, so they are
    /// echoed and written back unchanged) and of the file named by `tls.config.file`.
    ///
    /// # Errors
    /// A bad value (naming the key), an unreadable `tls.config.file`.
    pub fn tls_config(&self) -> Result<ferromq_remoting::tls::TlsConfig, ferromq_remoting::tls::TlsError> {
        ferromq_remoting::tls::TlsConfig::load(self.broker.unknown.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// Where UPDATE_BROKER_CONFIG persists the settings: `brokerConfigPath` if set, else
    /// `<storePathRootDir>/config/broker.properties` (Java's default is the same file under
    /// `~/store`, which is the default store root).
    pub fn config_store_path(&self) -> std::path::PathBuf {
        if self.broker.broker_config_path.is_empty() {
            self.store.store_path_root_dir.join("config").join("broker.properties")
        } else {
            std::path::PathBuf::from(&self.broker.broker_config_path)
        }
    }

    /// The HA port: `haListenPort` when the file sets it (any value but Java's default
    /// 10912; 0 picks a free port), else `listenPort + 1`, as Java 5 does.
    /// `storePathBrokerIdentity`, defaulted under the store root.
    pub fn broker_identity_path(&self) -> std::path::PathBuf {
        match self.broker.store_path_broker_identity.as_str() {
            "" => self.store.store_path_root_dir.join("brokerIdentity"),
            p => std::path::PathBuf::from(p),
        }
    }

    /// ACL 1.0's default file and directory of further files (Java:
    /// `$ROCKETMQ_HOME/conf/plain_acl.yml`, `$ROCKETMQ_HOME/conf/acl`).
    pub fn plain_acl_paths(&self) -> (std::path::PathBuf, std::path::PathBuf) {
        let home = match self.broker.rocketmq_home.trim() {
            "" => std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from(".")),
            h => std::path::PathBuf::from(h),
        };
        (home.join(ferromq_auth::plain::DEFAULT_PLAIN_FILE), home.join(ferromq_auth::plain::DEFAULT_ACL_DIR))
    }

    /// `storePathEpochFile`, defaulted under the store root.
    pub fn epoch_file_path(&self) -> std::path::PathBuf {
        match self.broker.store_path_epoch_file.as_str() {
            "" => self.store.store_path_root_dir.join("epochFileCheckpoint"),
            p => std::path::PathBuf::from(p),
        }
    }

    pub fn ha_listen_port(&self) -> u16 {
        if self.ha.ha_listen_port != ferromq_replication::HaConfig::default().ha_listen_port {
            self.ha.ha_listen_port
        } else {
            self.broker.listen_port.wrapping_add(1)
        }
    }

    /// Every setting as properties text (broker, store, then replication keys).
    pub fn to_text(&self) -> String {
        ferromq_config::properties_text::to_text(self.all_properties())
    }

    /// [`BrokerSettings::to_text`] for an admin client (GET_BROKER_CONFIG): TLS key passwords,
    /// which live among the file's keys here where Java keeps them in system properties, are
    /// masked.
    pub fn to_text_redacted(&self) -> String {
        let mut all = self.all_properties();
        for (key, value) in &mut all {
            if ferromq_remoting::tls::TlsConfig::is_tls_key(key) && key.ends_with("Password") && !value.is_empty() {
                *value = "******".to_owned();
            }
        }
        ferromq_config::properties_text::to_text(all)
    }

    fn all_properties(&self) -> Vec<(String, String)> {
        let mut all = self.broker.to_properties();
        all.extend(self.store.to_properties());
        all.extend(self.ha.to_properties());
        all.extend(self.metrics.to_properties());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_keys_are_kept_and_key_passwords_masked_for_admin_clients() {
        let mut s = BrokerSettings::default();
        let unknown = s
            .apply_text("tls.server.mode=enforcing\ntls.server.keyPassword=s3cret\ntls.client.keyPassword=\n")
            .unwrap();
        assert_eq!(unknown.len(), 3);
        assert_eq!(s.tls_config().unwrap().server_mode, ferromq_remoting::tls::TlsMode::Enforcing);
        assert!(s.to_text().contains("tls.server.keyPassword=s3cret"));
        let shown = s.to_text_redacted();
        assert!(shown.contains("tls.server.keyPassword=******") && !shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("tls.server.mode=enforcing") && shown.contains("tls.client.keyPassword=\n"), "{shown}");
    }

    #[test]
    fn one_file_feeds_broker_and_store_settings() {
        let mut s = BrokerSettings::default();
        let unknown = s
            .apply_text("brokerName=broker-x\nlistenPort=20911\nflushDiskType=SYNC_FLUSH\nmapedFileSizeCommitLog=1048576\nnoSuchKey=1\n")
            .unwrap();
        assert_eq!(s.broker.broker_name, "broker-x");
        assert_eq!(s.broker.listen_port, 20911);
        assert_eq!(s.store.flush_disk_type, ferromq_store::FlushDiskType::SyncFlush);
        assert_eq!(s.store.mapped_file_size_commit_log, 1_048_576);
        assert_eq!(unknown, vec!["noSuchKey".to_owned()]);
        assert!(s.store.unknown.is_empty());
        let text = s.to_text();
        assert!(text.contains("brokerName=broker-x") && text.contains("flushDiskType=SYNC_FLUSH"), "{text}");
        assert_eq!(s.ha_listen_port(), 20912, "listenPort + 1 unless set");
        s.set("haListenPort", "30000").unwrap();
        assert_eq!(s.ha_listen_port(), 30000);
        s.set("inSyncReplicas", "2").unwrap();
        assert_eq!(s.ha.in_sync_replicas, 2);
    }

    #[test]
    fn name_server_list_is_semicolon_separated() {
        let c = BrokerConfig { namesrv_addr: "a:1; b:2;".into(), ..BrokerConfig::default() };
        assert_eq!(c.namesrv_addrs(), vec!["a:1".to_owned(), "b:2".to_owned()]);
    }
}
