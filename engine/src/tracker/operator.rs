//! What operators set on endpoints through the API (drain, force up or down, release), on
//! one endpoint by name or on every endpoint with some labels (a location, a cloud).

use std::collections::BTreeMap;

use actix::prelude::*;

use super::{Clock, HealthTracker};
use crate::drain::{Forced, OperatorState};

/// An operator's action on one endpoint or on every endpoint with some labels; answers
/// which endpoints it matched and which it changed. Saved before it takes effect, so what
/// the API confirms survives a restart.
#[derive(Message)]
#[rtype(result = "Result<Applied, DrainError>")]
pub(crate) struct SetByOperator {
    /// Which endpoints.
    pub endpoints: Selection,
    /// What the operator asked.
    pub action: OperatorAction,
}

/// The endpoints an operator's action is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selection {
    /// The endpoint with this name (`/v1/endpoints/NAME/ACTION`).
    Name(String),
    /// Every endpoint carrying all these labels (`/v1/endpoints/*/ACTION?geo=IE`): a
    /// location, a cloud, a rack, at the time of the action.
    Labels(BTreeMap<String, String>),
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selection::Name(name) => f.write_str(name),
            Selection::Labels(labels) => {
                let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "endpoints with {}", pairs.join(","))
            }
        }
    }
}

/// What an operator's action did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The endpoints selected, in configuration order.
    pub matched: Vec<String>,
    /// Those the action changed.
    pub changed: Vec<String>,
}

/// What an operator can set on an endpoint (`POST /v1/endpoints/{name}/{action}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OperatorAction {
    /// Out of DNS, still probed.
    Drain,
    /// Back in DNS as its health says.
    Undrain,
    /// Healthy whatever its probes say.
    ForceUp,
    /// Unhealthy whatever its probes say.
    ForceDown,
    /// Its probes decide again.
    Release,
}

impl OperatorAction {
    /// The action as the API path, the logs and the metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            OperatorAction::Drain => "drain",
            OperatorAction::Undrain => "undrain",
            OperatorAction::ForceUp => "force-up",
            OperatorAction::ForceDown => "force-down",
            OperatorAction::Release => "release",
        }
    }

    /// The action named `name` in an API path.
    pub fn parse(name: &str) -> Option<OperatorAction> {
        [
            OperatorAction::Drain,
            OperatorAction::Undrain,
            OperatorAction::ForceUp,
            OperatorAction::ForceDown,
            OperatorAction::Release,
        ]
        .into_iter()
        .find(|a| a.name() == name)
    }

    /// What an endpoint is once the action is done (`drained`, `forced up`).
    pub fn outcome(self) -> &'static str {
        match self {
            OperatorAction::Drain => "drained",
            OperatorAction::Undrain => "undrained",
            OperatorAction::ForceUp => "forced up",
            OperatorAction::ForceDown => "forced down",
            OperatorAction::Release => "released",
        }
    }

    /// `state` with the action done on `endpoint`; whether anything changed.
    fn apply(self, state: &mut OperatorState, endpoint: &str) -> bool {
        match self {
            OperatorAction::Drain => state.drained.insert(endpoint.to_owned()),
            OperatorAction::Undrain => state.drained.remove(endpoint),
            OperatorAction::ForceUp => {
                state.forced.insert(endpoint.to_owned(), Forced::Up) != Some(Forced::Up)
            }
            OperatorAction::ForceDown => {
                state.forced.insert(endpoint.to_owned(), Forced::Down) != Some(Forced::Down)
            }
            OperatorAction::Release => state.forced.remove(endpoint).is_some(),
        }
    }
}

/// Why an operator action was not done.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DrainError {
    /// No endpoint has that name, or those labels: what was asked for.
    #[error("{0}")]
    Unknown(String),
    /// The state file could not be written; nothing changed.
    #[error("{0}")]
    Save(crate::state_file::StateFileError),
}

impl Handler<SetByOperator> for HealthTracker {
    type Result = Result<Applied, DrainError>;

    fn handle(&mut self, msg: SetByOperator, ctx: &mut Context<Self>) -> Self::Result {
        let matched = self.core.selected(&msg.endpoints);
        if matched.is_empty() {
            return Err(DrainError::Unknown(match &msg.endpoints {
                Selection::Name(name) => format!("no endpoint named {name:?}"),
                labels => format!("no {labels}"),
            }));
        }
        let mut state = OperatorState {
            drained: self.core.drained().clone(),
            forced: self.core.forced().clone(),
        };
        let changed: Vec<String> = matched
            .iter()
            .filter(|name| msg.action.apply(&mut state, name))
            .cloned()
            .collect();
        if !changed.is_empty() {
            self.drains.save(&state).map_err(DrainError::Save)?;
            let mut fx = Vec::new();
            self.core.set_operator(state, Clock::now(), &mut fx);
            self.carry_out(fx, ctx);
        }
        Ok(Applied { matched, changed })
    }
}

/// Operator state set on another replica (`[kubernetes] operator_state`): applied here and
/// kept in this replica's file, not handed on again.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Adopt(pub OperatorState);

impl Handler<Adopt> for HealthTracker {
    type Result = ();

    fn handle(&mut self, Adopt(state): Adopt, ctx: &mut Context<Self>) {
        let same = *self.core.drained() == state.drained && *self.core.forced() == state.forced;
        if same {
            return;
        }
        if let Err(e) = self.drains.keep(&state) {
            tracing::error!(
                "what another replica's operator set is applied but not kept here: {e}"
            );
        }
        let mut fx = Vec::new();
        self.core.set_operator(state, Clock::now(), &mut fx);
        self.carry_out(fx, ctx);
    }
}

/// Hands every later operator action to `0`, for the other replicas.
#[derive(Message)]
#[rtype(result = "OperatorState")]
pub(crate) struct Share(pub tokio::sync::watch::Sender<OperatorState>);

impl Handler<Share> for HealthTracker {
    type Result = MessageResult<Share>;

    fn handle(&mut self, Share(tx): Share, _: &mut Context<Self>) -> Self::Result {
        self.drains.share_with(tx);
        MessageResult(OperatorState {
            drained: self.core.drained().clone(),
            forced: self.core.forced().clone(),
        })
    }
}
