// Any type may be named in `matching`, generic ones too; one that is not an error
// is reported at the type.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(matching(Vec<u8>), action = "skip"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
