//! DNS on the wire, shared by the server and the RFC 2136 sink: TSIG keys ([`key`]), the
//! server side of TSIG ([`tsig_check`]: a signed request verified, its answers signed) and
//! one TCP connection to another server ([`client`]: queries, signed queries, UPDATEs).

pub mod client;
pub mod key;
pub mod tsig_check;
