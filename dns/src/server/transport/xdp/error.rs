//! Why the XDP path could not be set up.

/// Why the XDP path could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// No such interface in sysfs (or its index is not a number).
    #[error("no such interface ({path}: {reason})")]
    Interface {
        /// The sysfs file read.
        path: String,
        /// Why it did not give an index.
        reason: String,
    },
    /// The process lacks the capabilities to load a program.
    #[error("not permitted to load an XDP program: it takes CAP_BPF and CAP_NET_ADMIN (and CAP_NET_RAW for its sockets), or root ({0})")]
    NotPermitted(#[source] std::io::Error),
    /// The socket map could not be made.
    #[error("cannot create the XDP socket map: {0}")]
    Map(#[source] std::io::Error),
    /// The kernel's verifier refused the program; `log` is what it said.
    #[error("the kernel refused the XDP program: {source}; {log}")]
    Refused {
        /// The system call's error.
        #[source]
        source: std::io::Error,
        /// The verifier's log.
        log: String,
    },
    /// A receive queue's AF_XDP socket is taken by another program.
    #[error("queue {0} already has an AF_XDP socket (another XDP program on the interface?)")]
    QueueBusy(u32),
    /// A receive queue's AF_XDP socket could not be opened or put in the map.
    #[error("cannot {step} of queue {queue}: {source}")]
    Socket {
        /// What failed (e.g. `open the AF_XDP socket`).
        step: &'static str,
        /// The queue.
        queue: u32,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The program could not be attached.
    #[error("cannot attach the XDP program (another XDP program on the interface?): {0}")]
    Attach(#[source] std::io::Error),
}
