// A step's error type must convert into `StepError`; `String` does not implement `std::error::Error`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> Result<(), String> {
        Err(String::from("declined"))
    }
}

fn main() {}
