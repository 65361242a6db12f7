//! The words of the DSL: the values options take and the option names themselves.
//!
//! Each enum knows its spellings ([`ExceptionAction::ALL`] and friends), parses
//! with a did-you-mean, and prints back the string that is stored in Postgres.

use std::fmt;

/// A word that is not one of the allowed values. `Display` lists the allowed
/// values and, when one is close, suggests it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownWord {
    /// What was written.
    pub found: String,
    /// What the option accepts, in documentation order.
    pub allowed: &'static [&'static str],
    /// The closest allowed word, when one is close enough to be a likely typo or a
    /// known synonym (`retry` for `reattempt`).
    pub suggestion: Option<&'static str>,
    /// A rule that explains the refusal, when the word is close to an allowed one
    /// but breaks a rule (`run!`).
    pub note: Option<&'static str>,
}

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown value `{}`, expected {}",
            self.found,
            backticked(self.allowed)
        )?;
        if let Some(note) = self.note {
            write!(f, "; {note}")?;
        }
        if let Some(suggestion) = self.suggestion {
            write!(f, "; did you mean `{suggestion}`?")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownWord {}

/// `a`, `b` or `c`, each in backticks.
#[must_use]
pub fn backticked(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Words users reach for that the DSL spells otherwise, from other engines'
/// vocabularies: (what they write, what we call it).
const SYNONYMS: &[(&str, &str)] = &[
    ("retry", "reattempt"),
    ("abort", "cancel"),
    ("ignore", "skip"),
    ("suspend", "pause"),
    ("delay", "wait"),
    ("sleep", "wait"),
    ("retries", "max_reattempts"),
    ("max_retries", "max_reattempts"),
    ("max_attempts", "max_reattempts"),
    ("signal", "wait_for"),
    ("max_concurrency", "concurrency"),
    ("concurrency_limit", "concurrency"),
    ("concurrency_key", "key"),
    ("throttle", "rate_limit"),
    // Temporal's names for a queue and for the bound of one attempt.
    ("task_queue", "queue"),
    ("start_to_close_timeout", "timeout"),
];

/// The pgbus word for a word from another engine's vocabulary (`retry` ->
/// `reattempt`), if it is one.
#[must_use]
pub fn synonym(found: &str) -> Option<&'static str> {
    SYNONYMS
        .iter()
        .find(|(synonym, _)| *synonym == found)
        .map(|(_, word)| *word)
}

/// The allowed word closest to `found`: a known synonym (`retry` for
/// `reattempt`), else one close enough to be a typo (Jaro-Winkler similarity of
/// at least 0.8, the threshold darling uses).
#[must_use]
pub fn did_you_mean(found: &str, allowed: &[&'static str]) -> Option<&'static str> {
    let known = synonym(found).and_then(|word| allowed.iter().copied().find(|a| *a == word));
    if known.is_some() {
        return known;
    }
    closest(found, allowed.iter().copied())
}

/// The candidate close enough to `found` to be a typo of it (Jaro-Winkler
/// similarity of at least 0.8, the threshold darling uses), the closest one
/// when several are (of equals, the last). For names known only at run time
/// (signal names, workflow names); [`did_you_mean`] adds the synonyms of
/// the DSL's own words.
#[must_use]
pub fn closest<'a>(found: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (strsim::jaro_winkler(found, candidate), candidate))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $( $(#[$vmeta])* $variant ),+ }

        impl $name {
            /// Every spelling, in documentation order.
            pub const ALL: &'static [&'static str] = &[$($text),+];

            /// The stored and documented spelling.
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self { $( Self::$variant => $text ),+ }
            }

            /// Parses one of [`Self::ALL`].
            ///
            /// # Errors
            /// [`UnknownWord`] with the allowed values and a did-you-mean.
            pub fn parse(word: &str) -> Result<Self, UnknownWord> {
                match word {
                    $( $text => Ok(Self::$variant), )+
                    _ => Err(UnknownWord {
                        found: word.to_owned(),
                        allowed: Self::ALL,
                        suggestion: did_you_mean(word, Self::ALL),
                        note: None,
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

vocabulary! {
    /// What an `on_exception(action = "...")` policy does with a matched error.
    pub enum ExceptionAction {
        /// Pause the run; an operator resumes, skips or cancels it.
        Pause => "pause",
        /// Run the step again as a new attempt, up to `max_reattempts` times.
        Reattempt => "reattempt",
        /// Cancel the run.
        Cancel => "cancel",
        /// Skip the step and go on with the next one.
        Skip => "skip",
    }
}

vocabulary! {
    /// A way to stop going forward: `terminal_action` of a reattempt policy and
    /// `on_batch_failure` of a fan_out.
    pub enum FailureAction {
        /// Pause the run.
        Pause => "pause",
        /// Cancel the run.
        Cancel => "cancel",
        /// Skip the step and go on with the next one.
        Skip => "skip",
    }
}

vocabulary! {
    /// Whether an error matched by a policy is reported (a `tracing` error event
    /// and the error-report hook). The step row keeps the error either way.
    pub enum Report {
        /// Report every matched error (the default).
        Always => "always",
        /// Report none.
        Never => "never",
        /// Report only when the policy gives up: the terminal action of a reattempt
        /// policy, or any action that is not a reattempt.
        TerminalOnly => "terminal_only",
    }
}

vocabulary! {
    /// The shape of an entry in a workflow's step list, as written into the digest.
    pub enum EntryKind {
        /// A `#[step]` method.
        Step => "step",
        /// A `#[fan_out]` method.
        FanOut => "fan_out",
        /// A `removed_step!(name)` gravestone.
        Removed => "removed",
    }
}

/// What a step waiting on a signal does when its `wait_timeout` passes.
///
/// Spelled `pause`, `cancel`, `skip` or `run`; `pause!`, `cancel!` and `skip!` are
/// accepted as the same words (the bang spelling of the Ruby gem), `run!` is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnTimeout {
    /// Pause the run (the default).
    Pause,
    /// Cancel the run.
    Cancel,
    /// Skip the step.
    Skip,
    /// Run the body with no signal.
    Run,
}

impl OnTimeout {
    /// Every spelling without the optional `!`, in documentation order.
    pub const ALL: &'static [&'static str] = &["pause", "cancel", "skip", "run"];

    /// The stored spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pause => "pause",
            Self::Cancel => "cancel",
            Self::Skip => "skip",
            Self::Run => "run",
        }
    }

    /// Parses one of [`Self::ALL`], with an optional trailing `!` except on `run`.
    ///
    /// # Errors
    /// [`UnknownWord`] with the allowed values and a did-you-mean; `run!` is
    /// refused with `run` as the suggestion.
    pub fn parse(word: &str) -> Result<Self, UnknownWord> {
        let bare = word.strip_suffix('!').unwrap_or(word);
        let parsed = match bare {
            "pause" => Some(Self::Pause),
            "cancel" => Some(Self::Cancel),
            "skip" => Some(Self::Skip),
            "run" if bare.len() == word.len() => Some(Self::Run),
            _ => None,
        };
        parsed.ok_or_else(|| UnknownWord {
            found: word.to_owned(),
            allowed: Self::ALL,
            suggestion: did_you_mean(bare, Self::ALL),
            note: (word == "run!")
                .then_some("the `!` spelling is accepted on `pause!`, `cancel!` and `skip!` only"),
        })
    }
}

impl fmt::Display for OnTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Option names, per place they may be written, each with the shape of its
/// value. The macros use the names for unknown-option diagnostics and
/// did-you-mean suggestions, and the shapes for every message about a missing
/// or malformed value (`skip_if = ` with nothing after it). An option is
/// declared once, with its shape, so none can be added without one.
pub mod options {
    /// What an option's value looks like, said in a message: "`{name}` needs
    /// {needs}, e.g. `{example}`".
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Shape {
        /// The option's name, e.g. `skip_if`.
        pub name: &'static str,
        /// What the value is, completing "`skip_if` needs ...": e.g. `a method
        /// path`.
        pub needs: &'static str,
        /// The whole option written well, e.g. `skip_if = Self::opted_out`.
        pub example: &'static str,
    }

    /// The shape of option `name` in `shapes` (one of the `*_SHAPES` lists).
    #[must_use]
    pub fn shape(shapes: &'static [Shape], name: &str) -> Option<&'static Shape> {
        shapes.iter().find(|shape| shape.name == name)
    }

    macro_rules! place {
        ($(
            $(#[$doc:meta])*
            $names:ident, $shapes:ident {
                $($name:literal => $needs:literal, $example:literal;)+
            }
        )+) => {$(
            $(#[$doc])*
            pub const $names: &[&str] = &[$($name),+];

            #[doc = concat!("The shape of each option of [`", stringify!($names), "`], in its order.")]
            pub const $shapes: &[Shape] = &[$(Shape {
                name: $name,
                needs: $needs,
                example: $example,
            }),+];
        )+};
    }

    place! {
        /// `#[workflow(...)]`.
        WORKFLOW, WORKFLOW_SHAPES {
            "crate" => "the path of the runtime crate", "crate = \"pgbus\"";
            "name" => "the workflow's durable name in quotes", "name = \"orders.fulfil\"";
            "input" => "a type", "input = Order";
            "output" => "a type", "output = Receipt";
            "queue" => "a queue name in quotes", "queue = \"payments\"";
            "priority" => "an integer from -32768 to 32767", "priority = 5";
            "cancel_if" => "a method path", "cancel_if = Self::is_void";
            "on_exception" => "a policy in parentheses",
                "on_exception(matching(CardDeclined), action = \"cancel\")";
            "schedule" => "a cron expression in quotes", "schedule = \"0 0 7 * * *\"";
            "timezone" => "a time zone name in quotes", "timezone = \"Europe/Berlin\"";
            "catch_up" => "`skip`, `one`, `all` or `all(N)` in quotes", "catch_up = \"skip\"";
            "concurrency" => "a whole number of slots", "concurrency = 10";
            "key" => "a method path", "key = Self::customer";
            "key_concurrency" => "a whole number of slots", "key_concurrency = 1";
            "slot" => "`step` or `run` in quotes", "slot = \"run\"";
            "rate_limit" => "a rate in quotes", "rate_limit = \"10/1s\"";
            "key_rate_limit" => "a rate in quotes", "key_rate_limit = \"10/1s\"";
            "deadline" => "a duration", "deadline = \"1h\"";
            "on_deadline" => "`cancel` or `pause` in quotes", "on_deadline = \"pause\"";
        }

        /// `#[step(...)]`.
        STEP, STEP_SHAPES {
            "name" => "the step's durable name in quotes", "name = \"charge\"";
            "wait" => "a duration", "wait = \"5s\"";
            "timeout" => "a duration", "timeout = \"1m\"";
            "skip_if" => "a method path", "skip_if = Self::opted_out";
            "queue" => "a queue name in quotes", "queue = \"payments\"";
            "priority" => "an integer from -32768 to 32767", "priority = 5";
            "wait_for" => "a signal name in quotes", "wait_for = \"payment.settled\"";
            "wait_timeout" => "a duration", "wait_timeout = \"1h\"";
            "on_timeout" => "`pause`, `cancel`, `skip` or `run` in quotes", "on_timeout = \"skip\"";
            "on_exception" => "an action in quotes or a policy in parentheses",
                "on_exception = \"reattempt\"";
            "rate_limit" => "a rate in quotes", "rate_limit = \"10/1s\"";
        }

        /// `#[fan_out(...)]`.
        FAN_OUT, FAN_OUT_SHAPES {
            "name" => "the step's durable name in quotes", "name = \"ship\"";
            "wait" => "a duration", "wait = \"5s\"";
            "timeout" => "a duration", "timeout = \"1m\"";
            "skip_if" => "a method path", "skip_if = Self::opted_out";
            "queue" => "a queue name in quotes", "queue = \"payments\"";
            "priority" => "an integer from -32768 to 32767", "priority = 5";
            "on_batch_failure" => "`pause`, `cancel` or `skip` in quotes", "on_batch_failure = \"skip\"";
            "on_exception" => "an action in quotes or a policy in parentheses",
                "on_exception = \"reattempt\"";
            "rate_limit" => "a rate in quotes", "rate_limit = \"10/1s\"";
        }

        /// `on_exception(...)`, on a workflow or a step.
        ON_EXCEPTION, ON_EXCEPTION_SHAPES {
            "matching" => "error types in parentheses", "matching(CardDeclined, Timeout)";
            "action" => "`pause`, `reattempt`, `cancel` or `skip` in quotes", "action = \"pause\"";
            "handler" => "a method path", "handler = Self::on_declined";
            "wait" => "a duration", "wait = \"5s\"";
            "max_reattempts" => "an integer from 1 to 4294967295", "max_reattempts = 3";
            "terminal_action" => "`pause`, `cancel` or `skip` in quotes", "terminal_action = \"cancel\"";
            "report" => "`always`, `never` or `terminal_only` in quotes", "report = \"never\"";
        }

        /// `wait_for(...)`, the long form.
        WAIT_FOR, WAIT_FOR_SHAPES {
            "name" => "the signal's name in quotes", "name = \"payment.settled\"";
            "matches" => "a method path", "matches = Self::same_order";
        }
    }
}

#[cfg(test)]
mod tests;
