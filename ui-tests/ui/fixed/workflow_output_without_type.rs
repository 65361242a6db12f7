// `ui/fail/workflow_output_without_type.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Receipt {
    id: i64,
}

struct Fulfil;

#[workflow(output = Receipt)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
