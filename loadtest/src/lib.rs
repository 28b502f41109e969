//! The endpoint farm: real HTTP(S) gateways on loopback whose behaviour can be switched at
//! run time (healthy, failing status, refusing, hanging, resetting). The demo, the
//! integration tests and the load test all probe these instead of mocks.

mod gateway;

pub use gateway::{Behaviour, Gateway};
