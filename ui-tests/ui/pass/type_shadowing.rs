//! Generated code names everything by absolute path, so user types called
//! `Result`, `Option`, `Box`, `Some`, `None`, `Ok`, `Err`, `Vec`, `String`, a module
//! called `core` and a `StepError` of its own change nothing.
#![deny(warnings)]

// `#[step]` needs no import inside a `#[workflow]` impl: the workflow macro reads it.
use pgbus_runtime::prelude::{Deserialize, Flow, Serialize, StepCx, Workflow, workflow};

#[allow(dead_code)]
struct Result;
#[allow(dead_code)]
struct Option;
#[allow(dead_code)]
struct Box;
#[allow(dead_code)]
struct Some;
#[allow(dead_code)]
struct None;
#[allow(dead_code)]
struct Ok;
#[allow(dead_code)]
struct Err;
#[allow(dead_code)]
struct Vec;
#[allow(dead_code)]
struct String;
#[allow(dead_code)]
struct StepError;
#[allow(dead_code)]
struct StepResult;
#[allow(dead_code)]
mod core {}

#[derive(Serialize, Deserialize)]
struct Input {
    n: u8,
}

struct Shadowed;

#[workflow(input = Input, cancel_if = never)]
impl Shadowed {
    fn never(&self, cx: &StepCx<Input>) -> bool {
        cx.input().n > 200
    }

    #[step(wait = "1s")]
    async fn only(&self, _cx: &mut StepCx<Input>) -> Flow {
        Flow::Complete
    }
}

fn main() {
    assert_eq!(<Shadowed as Workflow>::DEFINITION.name, "Shadowed");
    assert_eq!(
        <Shadowed as Workflow>::DEFINITION.entries[0]
            .options
            .wait_ms,
        1_000
    );
}
