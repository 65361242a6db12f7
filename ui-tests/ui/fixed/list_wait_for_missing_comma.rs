// `ui/fail/list_wait_for_missing_comma.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    fn same_order(&self, _cx: &StepCx<()>, _signal: &Signal) -> bool {
        true
    }

    #[step(wait_for(name = "payment.settled", matches = Self::same_order))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
