// `Europe/Berlín` is no IANA time zone: refused at the `timezone` literal, with the close name.
use pgbus_runtime::prelude::*;

struct Report;

#[workflow(schedule = "0 0 7 * * *", timezone = "Europe/Berlín")]
impl Report {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `"Europe/Berlín"` => `"Europe/Berlin"`
