// `on_deadline` is `cancel` or `pause`; `abort` is another engine's word for `cancel`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, deadline = "1h", on_deadline = "abort")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `"abort"` => `"cancel"`
