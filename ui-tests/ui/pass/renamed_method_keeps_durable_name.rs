//! A method renamed from `charge` to `charge_card` keeps its durable name (and so
//! the digest and every parked run) through `name = "charge"`.

use pgbus_runtime::prelude::*;

struct Billing;

#[workflow(input = i64)]
impl Billing {
    #[step(name = "charge")]
    async fn charge_card(&self, _cx: &mut StepCx<i64>) -> StepResult {
        Ok(Flow::Complete)
    }
}

struct BillingBeforeRename;

#[workflow(input = i64)]
impl BillingBeforeRename {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<i64>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {
    let renamed = <Billing as Workflow>::DEFINITION;
    let before = <BillingBeforeRename as Workflow>::DEFINITION;
    assert_eq!(renamed.entries[0].name, "charge");
    assert_eq!(renamed.entries[0].method, Some("charge_card"));
    assert_eq!(renamed.digest, before.digest);
    assert_eq!(
        renamed.digest,
        pgbus_runtime::definition_digest([("charge", pgbus_runtime::EntryKind::Step)])
    );
}
