//! The stage for RFC 2136 updates: ACME DNS-01 challenges taken (NOTIMP without `acme`);
//! a taken update makes kept answers stale, raises the serial and NOTIFYs secondaries.

use std::sync::atomic::Ordering;

use hickory_proto::op::ResponseCode;

use super::begin::Begun;
use super::Authority;

impl Authority {
    /// Applies an RFC 2136 update (ACME challenges) and answers its status.
    pub(super) fn update(&self, query: &mut Begun) {
        let code = match &self.acme {
            None => ResponseCode::NotImp,
            Some(acme) => {
                let zones: Vec<&str> = self.zones.iter().map(|z| z.apex.as_str()).collect();
                let signer = query.signed.as_ref().map(|s| s.key_name());
                let records = self.records.read().expect("not poisoned");
                acme.apply(&query.query, signer, &zones, &records)
            }
        };
        if code == ResponseCode::NoError {
            // Answers kept from before the update are stale.
            self.generation.fetch_add(1, Ordering::Relaxed);
            if let Some(t) = &self.transfers {
                let mut records = self.records.write().expect("not poisoned");
                records.bump_serial();
                let serial = records.serial();
                for zone in t.remember(&self.zones, &records, self.acme.as_ref()) {
                    t.notify(&self.soa_record(zone, serial));
                }
            }
        }
        query.response.metadata.response_code = code;
    }
}
