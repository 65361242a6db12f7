//! Prints the compiled definition of the order-fulfilment workflow.
//!
//! Running the workflow on Postgres arrives with the engine; this program shows
//! what the macro compiled: the step table with normalized options and digests.

use pgbus_examples::Fulfil;
use pgbus_runtime::{EntryKind, Workflow, format_duration_ms};

fn main() {
    let definition = <Fulfil as Workflow>::DEFINITION;
    println!(
        "workflow {} (input {}, queue {})",
        definition.name, definition.input_type, definition.queue
    );
    println!("digest          {}", definition.digest);
    println!("options digest  {}", definition.options_digest);
    println!();
    println!(
        "{:<3} {:<14} {:<8} {:<6} {:<14} policies",
        "#", "step", "kind", "wait", "skip_if"
    );
    for (index, entry) in definition.entries.iter().enumerate() {
        let kind = match entry.kind {
            EntryKind::Step => "step",
            EntryKind::FanOut => "fan_out",
            EntryKind::Removed => "removed",
        };
        let skip_if = entry.options.skip_if.map_or("-", |guard| guard.method);
        println!(
            "{:<3} {:<14} {:<8} {:<6} {:<14} {}",
            index,
            entry.name,
            kind,
            format_duration_ms(entry.options.wait_ms),
            skip_if,
            entry.options.on_exception.len()
        );
    }
    println!();
    println!("the Postgres engine that runs these steps is not built yet; see the README");
}
