//! The two messages of the gRPC health protocol (`grpc.health.v1`), by hand: a request
//! with one string field and a response with one enum field do not need a protobuf
//! compiler. Framed as gRPC frames: a compression flag and a four-byte length first.

/// `HealthCheckRequest { string service = 1; }` in a gRPC frame.
pub fn request(service: &str) -> Vec<u8> {
    let mut message = Vec::new();
    if !service.is_empty() {
        message.push(0x0a); // field 1, length-delimited
        put_varint(&mut message, service.len() as u64);
        message.extend_from_slice(service.as_bytes());
    }
    let mut frame = vec![0]; // not compressed
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(&message);
    frame
}

/// `HealthCheckResponse.status` from the first gRPC frame of `body`: 0 UNKNOWN, 1 SERVING,
/// 2 NOT_SERVING, 3 SERVICE_UNKNOWN. A field left out is its proto3 default, 0.
pub fn status(body: &[u8]) -> Result<u64, MalformedHealthResponse> {
    read_status(body).map_err(MalformedHealthResponse)
}

/// [`status`] with its reason as text.
fn read_status(body: &[u8]) -> Result<u64, String> {
    let (flag, rest) = body.split_first().ok_or("empty response")?;
    if *flag != 0 {
        return Err("compressed response (none was offered)".into());
    }
    let len = rest
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or("truncated frame header")?;
    let mut message = rest.get(4..4 + len).ok_or("truncated message")?;
    let mut status = 0;
    while !message.is_empty() {
        let key = varint(&mut message)?;
        match (key >> 3, key & 7) {
            (1, 0) => status = varint(&mut message)?,
            (_, 0) => {
                varint(&mut message)?;
            }
            (_, 1) => message = message.get(8..).ok_or("truncated field")?,
            (_, 2) => {
                let n = varint(&mut message)? as usize;
                message = message.get(n..).ok_or("truncated field")?;
            }
            (_, 5) => message = message.get(4..).ok_or("truncated field")?,
            (_, wire) => return Err(format!("unknown wire type {wire}")),
        }
    }
    Ok(status)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint(bytes: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first().ok_or("truncated varint")?;
        *bytes = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("varint too long".into())
}

/// A gRPC health response that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MalformedHealthResponse(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_service_name() {
        assert_eq!(request(""), vec![0, 0, 0, 0, 0]);
        assert_eq!(
            request("api"),
            vec![0, 0, 0, 0, 5, 0x0a, 3, b'a', b'p', b'i']
        );
    }

    #[test]
    fn responses_give_their_status_and_skip_other_fields() {
        assert_eq!(status(&[0, 0, 0, 0, 2, 0x08, 1]), Ok(1));
        assert_eq!(status(&[0, 0, 0, 0, 0]), Ok(0), "the default");
        // An unknown length-delimited field 2 before the status.
        assert_eq!(
            status(&[0, 0, 0, 0, 6, 0x12, 2, b'x', b'y', 0x08, 2]),
            Ok(2)
        );
        assert!(status(&[0, 0, 0, 0, 9, 0x08]).is_err());
        assert!(status(&[1, 0, 0, 0, 0]).is_err());
        assert!(status(&[]).is_err());
    }
}
