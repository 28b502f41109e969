//! How queries reach the server and answers leave it, as hickory's `server/transport`:
//! the sockets (UDP and TCP, threads of their own, [`sockets`]) and the AF_XDP path
//! ([`xdp`]) both answer through [`serve::respond`] and count through a [`Tally`]; neither
//! imports the other's serving, and the answer layer below knows nothing of either.

mod error;
mod serve;
mod sockets;
pub mod xdp;

pub use error::ListenError;
#[cfg(feature = "fuzzing")]
pub(super) use serve::{respond, Tally};
pub(super) use sockets::Listener;
