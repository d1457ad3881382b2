//! Transactional-message headers: END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39).

use super::command_header;

command_header! {
    /// END_TRANSACTION (37), producer to broker.
    pub struct EndTransactionRequestHeader {
        pub topic: Option<String> => "topic",
        pub producer_group: String => "producerGroup",
        /// Queue offset of the half message.
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        /// Commit-log offset of the half message.
        pub commit_log_offset: i64 => "commitLogOffset",
        /// 0 unknown, 8 commit, 12 rollback (MessageSysFlag transaction values).
        pub commit_or_rollback: i32 => "commitOrRollback",
        pub from_transaction_check: Option<bool> => "fromTransactionCheck",
        pub msg_id: String => "msgId",
        pub transaction_id: Option<String> => "transactionId",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// CHECK_TRANSACTION_STATE (39), broker to producer, oneway.
    pub struct CheckTransactionStateRequestHeader {
        pub topic: Option<String> => "topic",
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        pub commit_log_offset: i64 => "commitLogOffset",
        pub msg_id: Option<String> => "msgId",
        pub transaction_id: Option<String> => "transactionId",
        pub offset_msg_id: Option<String> => "offsetMsgId",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// RESUME_CHECK_HALF_MESSAGE (323): a half message (or its discarded copy) is checked
    /// again from a count of 0. Java: `ResumeCheckHalfMessageRequestHeader`.
    pub struct ResumeCheckHalfMessageRequestHeader {
        /// 5.x: the topic the admin tool looked the message up in.
        pub topic: Option<String> => "topic",
        /// The offset message id of the stored copy.
        pub msg_id: Option<String> => "msgId",
    }
}
