//! Walking a slot's units: from the slot's last unit back through each unit's `prev_pos`.
//! Used by the dequeue task (to deliver a slot) and by recovery (to recount slots).
//! Java: the timerlog loop of `TimerMessageStore#dequeue`.

use crate::slot::Slot;
use crate::timer_log::{TimerLog, TimerLogUnit};

/// The units of `slot`, newest first, with their offsets. The walk ends at `prev_pos` -1,
/// and defensively at a unit that is gone (its segment deleted by retention) or invalid, at
/// a link that does not point backwards, or at a unit filed under another slot time (a
/// damaged chain): a damaged chain never loops or strays into other slots.
pub(crate) fn slot_units(log: &TimerLog, slot: &Slot, precision_ms: i64) -> Vec<(i64, TimerLogUnit)> {
    let mut units = Vec::with_capacity(slot.num.clamp(0, 1 << 16) as usize);
    let mut pos = slot.last_pos;
    while pos >= 0 {
        let Some(unit) = log.read_unit(pos) else { break };
        if unit.slot_time_ms().div_euclid(precision_ms) * precision_ms != slot.time_ms {
            break;
        }
        units.push((pos, unit));
        if unit.prev_pos >= pos {
            break;
        }
        pos = unit.prev_pos;
    }
    units
}

/// Java's slot count of a chain: +1 per unit, -1 per delete marker.
pub(crate) fn count(units: &[(i64, TimerLogUnit)]) -> i32 {
    units.iter().map(|(_, u)| if u.is_delete() { -1 } else { 1 }).sum()
}
