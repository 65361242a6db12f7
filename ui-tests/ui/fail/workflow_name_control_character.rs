// Durable names are stored as Postgres text and read by people: no NUL or other
// control characters.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow(name = "orders\0fulfil")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `"orders\0fulfil"` => `"orders.fulfil"`
