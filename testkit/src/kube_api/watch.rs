//! Watches: every change is an event with its revision; a watch replays the events after
//! the revision it resumes from, then streams live ones, one JSON object per line. A watch
//! with an equality `labelSelector` gets the events of matching objects only (an object
//! relabelled out of the selection gets no `DELETED`, which a real API server would send).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::Body;

struct Event {
    version: u64,
    plural: &'static str,
    ns: String,
    /// The object's `metadata.labels`.
    labels: Value,
    line: Bytes,
}

/// An equality label selector: every `key=value` must hold (empty: everything).
pub type Selector = Vec<(String, String)>;

/// Whether `object` carries every label of `selector`.
pub fn selected(object: &Value, selector: &[(String, String)]) -> bool {
    labels_match(&object["metadata"]["labels"], selector)
}

fn labels_match(labels: &Value, selector: &[(String, String)]) -> bool {
    selector.iter().all(|(k, v)| labels[k].as_str() == Some(v))
}

struct Watcher {
    plural: &'static str,
    ns: Option<String>,
    selector: Selector,
    tx: mpsc::UnboundedSender<Bytes>,
}

impl Watcher {
    fn wants(&self, e: &Event) -> bool {
        e.plural == self.plural
            && self.ns.as_ref().is_none_or(|n| *n == e.ns)
            && labels_match(&e.labels, &self.selector)
    }
}

/// The change history (since the last compaction) and the open watches.
#[derive(Default)]
pub struct Watches {
    events: Vec<Event>,
    compacted: u64,
    open: Vec<Watcher>,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut text = json!({ "type": kind, "object": object }).to_string();
    text.push('\n');
    Bytes::from(text)
}

impl Watches {
    /// Opens a watch of `plural` (in `ns`, or everywhere) for the objects `selector`
    /// selects. `from`: resume after this revision (410 Gone if compacted away); `None`:
    /// start with `current` as `ADDED`.
    pub fn open(
        &mut self,
        (plural, ns, selector): (&'static str, Option<String>, Selector),
        from: Option<u64>,
        current: Vec<Value>,
    ) -> mpsc::UnboundedReceiver<Bytes> {
        let (tx, rx) = mpsc::unbounded_channel();
        let watcher = Watcher {
            plural,
            ns,
            selector,
            tx,
        };
        match from {
            None => {
                for object in current.iter().filter(|o| selected(o, &watcher.selector)) {
                    let _ = watcher.tx.send(line("ADDED", object));
                }
            }
            Some(from) if from < self.compacted => {
                let gone = super::responses::status_object(
                    410,
                    "Expired",
                    &format!("too old resource version: {from} ({})", self.compacted),
                    None,
                );
                let _ = watcher.tx.send(line("ERROR", &gone));
                return rx;
            }
            Some(from) => {
                for e in &self.events {
                    if e.version > from && watcher.wants(e) {
                        let _ = watcher.tx.send(e.line.clone());
                    }
                }
            }
        }
        self.open.push(watcher);
        rx
    }

    /// Records a change and sends it to the watches it matches.
    pub fn publish(
        &mut self,
        version: u64,
        plural: &'static str,
        ns: &str,
        kind: &str,
        object: &Value,
    ) {
        let event = Event {
            version,
            plural,
            ns: ns.to_owned(),
            labels: object["metadata"]["labels"].clone(),
            line: line(kind, object),
        };
        self.open.retain(|w| {
            if !w.wants(&event) {
                return !w.tx.is_closed();
            }
            w.tx.send(event.line.clone()).is_ok()
        });
        self.events.push(event);
    }

    /// Ends every open watch.
    pub fn drop_all(&mut self) {
        self.open.clear();
    }

    /// Forgets the history up to `version`.
    pub fn compact(&mut self, version: u64) {
        self.compacted = version;
        self.events.retain(|e| e.version > version);
    }
}

/// The response body of a watch: its lines until the watch is dropped or `timeout` passes.
pub fn body(rx: mpsc::UnboundedReceiver<Bytes>, timeout: Duration) -> Body {
    let deadline = tokio::time::Instant::now() + timeout;
    let stream = futures_util::stream::unfold(rx, move |mut rx| async move {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(line)) => Some((Ok(Frame::data(line)), rx)),
            _ => None,
        }
    });
    StreamBody::new(stream).boxed()
}
