//! The gateways of a run: the test kit's gateways on 127.16.0.0/12, one listener each, or
//! all behind one listener when there are more than the open-file limit allows (or when a
//! run needs each gateway's probe gaps, which the shared listener keeps).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use ho_testkit::{Behaviour, Gateway, SharedFarm};

/// The gateways of a run.
pub enum Farm {
    /// One listener each.
    Separate(Vec<Gateway>),
    /// All behind one listener.
    Shared(SharedFarm),
}

impl Farm {
    /// Starts `count` healthy gateways.
    pub fn start(count: usize, shared: bool) -> anyhow::Result<Farm> {
        if shared {
            return Ok(Farm::Shared(SharedFarm::start(address(0)?, count)?));
        }
        let mut gateways = Vec::with_capacity(count);
        for i in 0..count {
            let addr = SocketAddr::new(IpAddr::V4(address(i)?), 0);
            gateways.push(
                Gateway::start(addr, Behaviour::Healthy)
                    .with_context(|| format!("starting gateway {addr}"))?,
            );
        }
        Ok(Farm::Separate(gateways))
    }

    /// Every gateway's address, in order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        match self {
            Farm::Separate(g) => g.iter().map(Gateway::addr).collect(),
            Farm::Shared(f) => (0..f.len()).map(|i| f.addr(i)).collect(),
        }
    }

    /// Switches gateway `i`'s behaviour.
    pub fn set(&mut self, i: usize, behaviour: &Behaviour) -> std::io::Result<()> {
        match self {
            Farm::Separate(g) => g[i].set(behaviour.clone()),
            Farm::Shared(f) => {
                f.set(i, behaviour);
                Ok(())
            }
        }
    }

    /// The shared listener's farm, which counts each gateway's probes and gaps.
    pub fn shared(&self) -> Option<&SharedFarm> {
        match self {
            Farm::Separate(_) => None,
            Farm::Shared(f) => Some(f),
        }
    }

    /// Probes each gateway received so far (shared listener only).
    pub fn visits(&self) -> Option<Vec<u32>> {
        let f = self.shared()?;
        Some((0..f.len()).map(|i| f.visits(i)).collect())
    }

    /// The longest any gateway went without a probe since [`SharedFarm::reset_gaps`], and how
    /// many went longer than `limit` (shared listener only).
    pub fn gaps(&self, limit: Duration) -> Option<(Duration, usize)> {
        let f = self.shared()?;
        let gaps: Vec<Duration> = (0..f.len()).map(|i| f.longest_gap(i)).collect();
        let longest = gaps.iter().copied().max().unwrap_or_default();
        Some((longest, gaps.iter().filter(|&&g| g > limit).count()))
    }
}

/// Gateway `i`'s address: 127.16.0.1 + i, inside 127.16.0.0/12.
pub fn address(i: usize) -> anyhow::Result<Ipv4Addr> {
    let ip = u32::from(Ipv4Addr::new(127, 16, 0, 1)) + u32::try_from(i)?;
    anyhow::ensure!(
        ip < u32::from(Ipv4Addr::new(127, 32, 0, 0)),
        "too many endpoints for 127.16.0.0/12"
    );
    Ok(Ipv4Addr::from(ip))
}
