// The result is stored as JSON, so `output` must be `Serialize + DeserializeOwned`; the error points at the type.
use pgbus_runtime::prelude::*;

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

fn main() {
    let _ = Receipt { id: 1 }.id;
}
