//! Who may do what: the one authorization policy of the service, for the API and the pages alike.
//!
//! Every route of both faces is an [`Action`] (`http::access::action_of` is the table); every action is
//! [`Public`](Kind::Public), a [`Read`](Kind::Read), a [`Write`](Kind::Write) or an
//! [`Administer`](Kind::Administer) action; and one setting, [`Access`], says which kinds need a
//! signed-in caller (an API token, or the pages' sign-in with one). A route missing from the table
//! is refused, so a new route is closed until it is given an action.
//!
//! The default, [`Access::Auto`], keeps the first start easy without exposing stored logs to the
//! network: bound to a loopback address, the server is open to requests that come from this
//! machine (peer on loopback, a loopback `Host`, no proxy headers) and closed to every other one;
//! bound to any other address, reads and writes need a token unless the operator says `open`.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The deployment's access mode: one setting for the API and the pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// `open` for requests from this machine when bound to loopback, `private` otherwise.
    #[default]
    Auto,
    /// Anyone who reaches the server reads and writes (administration still needs a token).
    Open,
    /// Anyone reads; writes need a token.
    TokenForWrites,
    /// Reads and writes need a token.
    Private,
}

impl Access {
    /// The setting's name, as written in `faultline.toml` and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Open => "open",
            Self::TokenForWrites => "token-for-writes",
            Self::Private => "private",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Access {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "open" => Ok(Self::Open),
            "token-for-writes" => Ok(Self::TokenForWrites),
            "private" => Ok(Self::Private),
            other => Err(format!(
                "{other:?} is not an access mode: auto, open, token-for-writes or private"
            )),
        }
    }
}

/// What an action does to what the server keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Touches nothing stored: health, the API's description, the pages' assets and sign-in.
    Public,
    /// Shows what is stored (logs, incidents, feedback, notes, rules and their hits) or uses the
    /// server's CPU for the caller (an analysis that is not stored).
    Read,
    /// Stores something (an incident, feedback, a note, a snapshot).
    Write,
    /// Runs a user's code-like input over every stored log (a candidate rule's backtest): needs a
    /// signed-in caller in every mode.
    Administer,
}

/// Everything a client can ask of the service, through the API or the pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Health, readiness, metrics, the API's description.
    Operate,
    /// The pages' stylesheet and script, the sign-in and sign-out pages.
    SignIn,
    /// A log analysed and answered, not stored.
    Analyze,
    /// A log analysed and stored as an incident.
    StoreIncident,
    /// Incidents and their logs, listed, searched, one by one, similar ones.
    ViewIncidents,
    /// Groups, their history and notes.
    ViewGroups,
    /// Rules, their hits and feedback.
    ViewRules,
    /// A replay job's state and results.
    ViewReplay,
    /// Feedback on an incident.
    AddFeedback,
    /// A note on a group.
    AddNote,
    /// A tensor snapshot attached to an incident (queues a replay job).
    UploadSnapshot,
    /// A candidate rule run over stored logs.
    BacktestRule,
}

impl Action {
    /// What the action does.
    pub const fn kind(self) -> Kind {
        match self {
            Self::Operate | Self::SignIn => Kind::Public,
            Self::Analyze | Self::ViewIncidents | Self::ViewGroups | Self::ViewRules | Self::ViewReplay => {
                Kind::Read
            }
            Self::StoreIncident | Self::AddFeedback | Self::AddNote | Self::UploadSnapshot => Kind::Write,
            Self::BacktestRule => Kind::Administer,
        }
    }

    /// A few words for messages: "store an incident".
    pub const fn describe(self) -> &'static str {
        match self {
            Self::Operate => "check the server",
            Self::SignIn => "sign in",
            Self::Analyze => "analyze a log",
            Self::StoreIncident => "store an incident",
            Self::ViewIncidents => "read incidents and their logs",
            Self::ViewGroups => "read groups",
            Self::ViewRules => "read rules",
            Self::ViewReplay => "read replay jobs",
            Self::AddFeedback => "give feedback",
            Self::AddNote => "add a note",
            Self::UploadSnapshot => "attach a snapshot",
            Self::BacktestRule => "backtest a rule",
        }
    }
}

/// Who asks, as far as the policy cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requester {
    /// The caller proved a valid token (a bearer token, or the pages' sign-in).
    pub signed_in: bool,
    /// The request came from this machine (see [`is_local_request`]).
    pub local: bool,
}

/// Why an action was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The action needs a signed-in caller.
    #[error("{}", sign_in_message(*.action, *.mode))]
    SignInRequired {
        /// What was asked.
        action: Action,
        /// The mode that asks for a token.
        mode: Access,
    },
    /// The route has no action in the table: refused until it is given one.
    #[error("this route has no access rule; it is refused (a bug: report it)")]
    UnknownRoute,
}

fn sign_in_message(action: Action, mode: Access) -> String {
    let why = match (action.kind(), mode) {
        (Kind::Administer, _) => "it always needs a token".to_owned(),
        (_, Access::Auto) => "this server is open only to requests from its own machine".to_owned(),
        (_, mode) => format!("this server's access mode is {mode}"),
    };
    format!(
        "to {} here, sign in with an API token ({why}): send `Authorization: Bearer <token>`, \
         or sign in on the pages; an operator creates one with `faultline token create --name NAME`",
        action.describe()
    )
}

/// The policy of one running server: its access mode and whether it listens on loopback only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    mode: Access,
    loopback: bool,
}

impl Policy {
    /// The policy of a server in `mode` listening on `bind`.
    pub fn new(mode: Access, bind: SocketAddr) -> Self {
        Self {
            mode,
            loopback: bind.ip().is_loopback(),
        }
    }

    /// The mode as set.
    pub fn mode(&self) -> Access {
        self.mode
    }

    /// One line for the start-up message: who may read and write.
    pub fn describe(&self) -> &'static str {
        match (self.mode, self.loopback) {
            (Access::Auto, true) => "open to this machine only",
            (Access::Auto, false) | (Access::Private, _) => "reads and writes need a token",
            (Access::Open, _) => "open: anyone who reaches it reads and writes",
            (Access::TokenForWrites, _) => "anyone reads, writes need a token",
        }
    }

    /// Whether the server is open to the network with no token for reads (worth a warning).
    pub fn exposes_logs(&self) -> bool {
        !self.loopback && matches!(self.mode, Access::Open | Access::TokenForWrites)
    }

    /// Whether `who` may do `action`.
    pub fn decide(&self, action: Action, who: Requester) -> Result<(), Denied> {
        let needs_token = match action.kind() {
            Kind::Public => false,
            Kind::Administer => true,
            Kind::Read => match self.mode {
                Access::Open | Access::TokenForWrites => false,
                Access::Private => true,
                Access::Auto => !(self.loopback && who.local),
            },
            Kind::Write => match self.mode {
                Access::Open => false,
                Access::TokenForWrites | Access::Private => true,
                Access::Auto => !(self.loopback && who.local),
            },
        };
        if needs_token && !who.signed_in {
            return Err(Denied::SignInRequired {
                action,
                mode: self.mode,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANONYMOUS_LOCAL: Requester = Requester {
        signed_in: false,
        local: true,
    };
    const ANONYMOUS_REMOTE: Requester = Requester {
        signed_in: false,
        local: false,
    };
    const SIGNED_IN_REMOTE: Requester = Requester {
        signed_in: true,
        local: false,
    };

    fn policy(mode: Access, bind: &str) -> Policy {
        Policy::new(mode, bind.parse().unwrap_or_else(|e| panic!("{e}")))
    }

    fn allowed(policy: Policy, action: Action, who: Requester) -> bool {
        policy.decide(action, who).is_ok()
    }

    #[test]
    fn auto_on_loopback_is_open_to_this_machine_and_closed_to_everyone_else() {
        let p = policy(Access::Auto, "127.0.0.1:8080");
        assert!(allowed(p, Action::ViewIncidents, ANONYMOUS_LOCAL));
        assert!(allowed(p, Action::StoreIncident, ANONYMOUS_LOCAL));
        assert!(!allowed(p, Action::ViewIncidents, ANONYMOUS_REMOTE));
        assert!(!allowed(p, Action::StoreIncident, ANONYMOUS_REMOTE));
        assert!(allowed(p, Action::ViewIncidents, SIGNED_IN_REMOTE));
    }

    #[test]
    fn auto_on_any_other_address_needs_a_token_for_reads_and_writes() {
        let p = policy(Access::Auto, "0.0.0.0:8080");
        for action in [
            Action::Analyze,
            Action::ViewIncidents,
            Action::StoreIncident,
            Action::AddNote,
        ] {
            assert!(!allowed(p, action, ANONYMOUS_LOCAL), "{action:?}");
            assert!(allowed(p, action, SIGNED_IN_REMOTE), "{action:?}");
        }
        assert!(allowed(p, Action::Operate, ANONYMOUS_REMOTE));
        assert!(allowed(p, Action::SignIn, ANONYMOUS_REMOTE));
    }

    #[test]
    fn each_explicit_mode_covers_reads_and_writes_of_both_faces() {
        let open = policy(Access::Open, "0.0.0.0:8080");
        assert!(allowed(open, Action::ViewIncidents, ANONYMOUS_REMOTE));
        assert!(allowed(open, Action::UploadSnapshot, ANONYMOUS_REMOTE));
        let writes = policy(Access::TokenForWrites, "0.0.0.0:8080");
        assert!(allowed(writes, Action::ViewIncidents, ANONYMOUS_REMOTE));
        assert!(!allowed(writes, Action::AddFeedback, ANONYMOUS_REMOTE));
        let private = policy(Access::Private, "127.0.0.1:8080");
        assert!(!allowed(private, Action::ViewRules, ANONYMOUS_LOCAL));
        assert!(!allowed(private, Action::Analyze, ANONYMOUS_LOCAL));
        assert!(allowed(private, Action::Operate, ANONYMOUS_LOCAL));
    }

    #[test]
    fn a_backtest_needs_a_token_in_every_mode() {
        for mode in [
            Access::Auto,
            Access::Open,
            Access::TokenForWrites,
            Access::Private,
        ] {
            let p = policy(mode, "127.0.0.1:8080");
            assert!(!allowed(p, Action::BacktestRule, ANONYMOUS_LOCAL), "{mode}");
            assert!(allowed(p, Action::BacktestRule, SIGNED_IN_REMOTE), "{mode}");
        }
    }

    #[test]
    fn a_refusal_says_what_was_asked_and_how_to_get_a_token() {
        let p = policy(Access::TokenForWrites, "0.0.0.0:8080");
        let message = p
            .decide(Action::AddNote, ANONYMOUS_REMOTE)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("add a note"), "{message}");
        assert!(message.contains("token-for-writes"), "{message}");
        assert!(message.contains("faultline token create"), "{message}");
    }

    #[test]
    fn modes_are_read_from_their_names() {
        for mode in [
            Access::Auto,
            Access::Open,
            Access::TokenForWrites,
            Access::Private,
        ] {
            assert_eq!(mode.name().parse::<Access>(), Ok(mode));
        }
        assert!("public".parse::<Access>().is_err());
    }
}
