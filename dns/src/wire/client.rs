//! One TCP connection to the server: queries to read names, a TSIG-signed UPDATE to change
//! them (RFC 1035 4.2.2 framing: each message prefixed by its two-byte length).

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType, TSigner};
use ho_engine::sink::SinkError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use ho_engine::clock::unix_now;

/// An open connection with its deadline per exchange.
pub struct Connection {
    stream: TcpStream,
    server: SocketAddr,
    timeout: Duration,
}

impl Connection {
    /// Connects to `server`.
    pub async fn open(server: SocketAddr, timeout: Duration) -> Result<Connection, SinkError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(server))
            .await
            .map_err(|_| {
                SinkError::retriable(format!("connect to {server}: timed out after {timeout:?}"))
            })?
            .map_err(|e| SinkError::retriable(format!("connect to {server}: {e}")))?;
        Ok(Connection {
            stream,
            server,
            timeout,
        })
    }

    /// Sends `message`, returns the raw response with the same id.
    async fn exchange(
        &mut self,
        message: &[u8],
        id: u16,
        what: &str,
    ) -> Result<Vec<u8>, SinkError> {
        let server = self.server;
        let io = |e: std::io::Error| SinkError::retriable(format!("{what} to {server}: {e}"));
        if message.len() > usize::from(u16::MAX) {
            return Err(SinkError::permanent(format!("{what}: message over 64 KiB")));
        }
        let run = async {
            exchange_framed(&mut self.stream, message, id)
                .await
                .map_err(io)
        };
        tokio::time::timeout(self.timeout, run).await.map_err(|_| {
            SinkError::retriable(format!(
                "{what} to {server}: no answer within {:?}",
                self.timeout
            ))
        })?
    }

    /// The `rtype` records at `name` as the server answers them (NXDOMAIN: none).
    pub async fn query(&mut self, name: &Name, rtype: RecordType) -> Result<Message, SinkError> {
        self.query_signed(name, rtype, None).await
    }

    /// As [`Connection::query`], signed with `signer` when given; the answer must then be
    /// signed with the same key (a forged or unsigned one is an error, never data).
    pub async fn query_signed(
        &mut self,
        name: &Name,
        rtype: RecordType,
        signer: Option<&TSigner>,
    ) -> Result<Message, SinkError> {
        let mut answers = self
            .query_all(std::slice::from_ref(name), rtype, signer)
            .await?;
        Ok(answers.remove(0))
    }

    /// The `rtype` records at each of `names`, asked at once (the queries pipelined on the
    /// connection, RFC 7766, so a far server costs one round trip, not one per name),
    /// signed with `signer` when given; the answers in the order of `names`.
    pub async fn query_all(
        &mut self,
        names: &[Name],
        rtype: RecordType,
        signer: Option<&TSigner>,
    ) -> Result<Vec<Message>, SinkError> {
        let mut framed = Vec::new();
        let mut pending = Vec::with_capacity(names.len());
        for name in names {
            let mut query = Message::query();
            query.metadata.recursion_desired = false;
            query.add_query(Query::query(name.clone(), rtype));
            let what = format!("query {name} {rtype}");
            let verifier = match signer {
                Some(signer) => query
                    .finalize(signer, unix_now())
                    .map_err(|e| SinkError::permanent(format!("{what}: cannot sign: {e}")))?,
                None => None,
            };
            let bytes = query
                .to_vec()
                .map_err(|e| SinkError::permanent(format!("{what}: {e}")))?;
            let len = u16::try_from(bytes.len())
                .map_err(|_| SinkError::permanent(format!("{what}: message over 64 KiB")))?;
            framed.extend_from_slice(&len.to_be_bytes());
            framed.extend_from_slice(&bytes);
            pending.push((query.metadata.id, what, verifier));
        }
        let server = self.server;
        let asked = format!("{} queries to {server}", names.len());
        let io = |e: std::io::Error| SinkError::retriable(format!("{asked}: {e}"));
        let mut raw: Vec<Option<Vec<u8>>> = vec![None; names.len()];
        let run = async {
            self.stream.write_all(&framed).await.map_err(io)?;
            let mut left = names.len();
            while left > 0 {
                let n = self.stream.read_u16().await.map_err(io)?;
                let mut buf = vec![0u8; usize::from(n)];
                self.stream.read_exact(&mut buf).await.map_err(io)?;
                let id = buf.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
                let slot = pending.iter().position(|(i, _, _)| Some(*i) == id);
                if let Some(i) = slot.filter(|&i| raw[i].is_none()) {
                    raw[i] = Some(buf);
                    left -= 1;
                }
            }
            Ok::<_, SinkError>(())
        };
        tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| {
                SinkError::retriable(format!("{asked}: no answer within {:?}", self.timeout))
            })??;
        pending
            .into_iter()
            .zip(raw)
            .map(|((_, what, verifier), raw)| judge(&what, &raw.unwrap_or_default(), verifier))
            .collect()
    }

    /// Sends `update` signed with `signer` (if any); `Ok` when the server applied it.
    pub async fn update(
        &mut self,
        mut update: Message,
        signer: Option<&TSigner>,
        zone: &str,
    ) -> Result<(), SinkError> {
        update.metadata.message_type = MessageType::Query;
        update.metadata.op_code = OpCode::Update;
        let id = update.metadata.id;
        let what = format!("UPDATE of zone {zone}");
        let mut verifier = None;
        if let Some(signer) = signer {
            verifier = update
                .finalize(signer, unix_now())
                .map_err(|e| SinkError::permanent(format!("{what}: cannot sign: {e}")))?;
        }
        let bytes = update
            .to_vec()
            .map_err(|e| SinkError::permanent(format!("{what}: {e}")))?;
        let raw = self.exchange(&bytes, id, &what).await?;
        let answer = Message::from_vec(&raw)
            .map_err(|e| SinkError::retriable(format!("{what}: unreadable answer: {e}")))?;
        let rcode = answer.metadata.response_code;
        if rcode == ResponseCode::NoError {
            if let Some(v) = verifier.as_mut() {
                v.verify(&raw).map_err(|e| {
                    SinkError::permanent(format!(
                        "{what}: the answer is not signed with our key: {e}"
                    ))
                })?;
            }
            return Ok(());
        }
        Err(explain(rcode, &answer, &what, zone))
    }
}

/// The answer to a query as data, or the specific error: a refusal, a key the server
/// rejected, an answer not signed with the key the query was.
fn judge(
    what: &str,
    raw: &[u8],
    mut verifier: Option<hickory_proto::rr::TSigVerifier>,
) -> Result<Message, SinkError> {
    let answer = Message::from_vec(raw)
        .map_err(|e| SinkError::retriable(format!("{what}: unreadable answer: {e}")))?;
    match answer.metadata.response_code {
        ResponseCode::NoError | ResponseCode::NXDomain => {
            if let Some(v) = verifier.as_mut() {
                v.verify(raw).map_err(|e| {
                    SinkError::retriable(format!(
                        "{what}: the answer is not signed with our key: {e}"
                    ))
                })?;
            }
            Ok(answer)
        }
        ResponseCode::Refused => Err(SinkError::permanent(format!(
            "{what}: REFUSED (the server must answer queries for the zone from this address)"
        ))),
        ResponseCode::NotAuth => Err(SinkError::permanent(format!(
            "{what}: NOTAUTH{}: the server rejected the TSIG key (check tsig.name, tsig.algorithm and the secret)",
            tsig_error(&answer)
        ))),
        other => Err(SinkError::retriable(format!("{what}: {other}"))),
    }
}

/// `, TSIG error E` when the answer's TSIG names one.
fn tsig_error(answer: &Message) -> String {
    answer
        .signature
        .as_ref()
        .and_then(|s| s.data.error.as_ref().map(|e| format!(", TSIG error {e:?}")))
        .unwrap_or_default()
}

/// A specific error for each way an update is refused.
fn explain(rcode: ResponseCode, answer: &Message, what: &str, zone: &str) -> SinkError {
    match rcode {
        ResponseCode::YXDomain | ResponseCode::YXRRSet | ResponseCode::NXDomain | ResponseCode::NXRRSet => {
            SinkError::retriable(format!(
                "{what}: a prerequisite no longer holds ({rcode}): the records changed between read and update; reading again"
            ))
        }
        ResponseCode::NotAuth => {
            let tsig = tsig_error(answer);
            SinkError::permanent(format!(
                "{what}: NOTAUTH{tsig}: the server rejected the TSIG key (check tsig.name, tsig.algorithm and the secret) or is not authoritative for {zone}"
            ))
        }
        ResponseCode::Refused => SinkError::permanent(format!(
            "{what}: REFUSED: the server does not allow this key (or address) to update {zone} (allow-update / update-policy)"
        )),
        ResponseCode::NotZone => {
            SinkError::permanent(format!("{what}: NOTZONE: {zone} is not a zone on the server"))
        }
        other => SinkError::retriable(format!("{what}: {other}")),
    }
}

/// `query` (whose id is `id`) over a new TCP connection to `server`: the answer with that
/// id, unparsed. The caller bounds the wait.
pub async fn over_tcp(server: SocketAddr, query: &[u8], id: u16) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(server).await?;
    exchange_framed(&mut stream, query, id).await
}

/// `message` (whose id is `id`) sent on `stream` and the answer with that id read back,
/// unparsed; each message framed by its two-byte length (RFC 1035 4.2.2). Answers with
/// another id (a late one to an earlier question) are skipped. The caller bounds the wait.
pub async fn exchange_framed(
    stream: &mut TcpStream,
    message: &[u8],
    id: u16,
) -> std::io::Result<Vec<u8>> {
    let len = u16::try_from(message.len()).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "message over 64 KiB")
    })?;
    let mut framed = Vec::with_capacity(message.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(message);
    stream.write_all(&framed).await?;
    loop {
        let n = stream.read_u16().await?;
        let mut answer = vec![0u8; usize::from(n)];
        stream.read_exact(&mut answer).await?;
        if answer.get(..2) == Some(&id.to_be_bytes()[..]) {
            return Ok(answer);
        }
    }
}
