// Counts are 1 to 1000 and periods 1ms to 1d: each rate out of range is refused with its own message.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, rate_limit = "0/1s", key_rate_limit = "1001/1s")]
impl Fulfil {
    #[step(rate_limit = "10/0s")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}

    #[fan_out(rate_limit = "1/2d")]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) {}
}

fn main() {}

// fix: `rate_limit = "0/1s", ` => ``
// fix: `"1001/1s"` => `"1000/1s"`
// fix: `#[step(rate_limit = "10/0s")]` => `#[step]`
// fix: `#[fan_out(rate_limit = "1/2d")]` => `#[fan_out]`
