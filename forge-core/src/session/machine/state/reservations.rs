//! Reservations against a family's budget, so that parallel helpers
//! cannot all pass the check before any of them is charged. Before a
//! request, its worst case (the input as estimated plus all the output it
//! may ask for, at the model's prices) is reserved at the family's root;
//! it is released when the response ends. A request goes at once when no
//! other of the family is in flight (a budget smaller than one request's
//! worst case still lets work go one request at a time), else it waits
//! while the spend plus the reservations in flight would pass the budget.
//! Parallel helpers then overshoot by at most one request.

use std::collections::VecDeque;

/// The root's reservations: what is in flight, by asker, and who waits.
#[derive(Debug, Default)]
pub(crate) struct Reservations {
    in_flight: Vec<(String, f64)>,
    waiting: VecDeque<(String, f64)>,
}

impl Reservations {
    fn reserved(&self) -> f64 {
        self.in_flight.iter().map(|(_, usd)| usd).sum()
    }

    fn fits(&self, reserve: f64, room: f64) -> bool {
        self.in_flight.is_empty() || self.reserved() + reserve <= room
    }

    /// `asker`'s request is over (its response ended, or its turn).
    pub fn release(&mut self, asker: &str) {
        self.in_flight.retain(|(a, _)| a != asker);
    }

    /// `asker` is about to send a request whose worst case is `reserve`,
    /// with `room` left of the budget: true when it may go now, else it
    /// waits (see [`Reservations::admit_waiting`]).
    pub fn ask(&mut self, asker: String, reserve: f64, room: f64) -> bool {
        // Asking again means its earlier request is over.
        self.release(&asker);
        self.waiting.retain(|(a, _)| *a != asker);
        if self.fits(reserve, room) {
            self.in_flight.push((asker, reserve));
            true
        } else {
            self.waiting.push_back((asker, reserve));
            false
        }
    }

    /// Those waiting that may go now, in the order they asked (the first
    /// that does not fit holds the others back, so none starves).
    pub fn admit_waiting(&mut self, room: f64) -> Vec<String> {
        let mut admitted = Vec::new();
        while let Some((asker, reserve)) = self.waiting.front().cloned() {
            if !self.fits(reserve, room) {
                break;
            }
            self.waiting.pop_front();
            self.in_flight.push((asker.clone(), reserve));
            admitted.push(asker);
        }
        admitted
    }

    /// Everyone waiting, with what each would reserve (the budget is
    /// reached: they wait for the family's approval instead).
    pub fn take_waiting(&mut self) -> Vec<(String, f64)> {
        self.waiting.drain(..).collect()
    }

    /// `asker` stops waiting (its turn ended).
    pub fn forget(&mut self, asker: &str) {
        self.release(asker);
        self.waiting.retain(|(a, _)| a != asker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_while_the_worst_cases_fit_and_one_at_a_time_when_none_does() {
        let mut r = Reservations::default();
        // Each worst case is larger than the whole budget: one at a time.
        assert!(r.ask("a".into(), 0.12, 0.02), "alone, it always goes");
        assert!(!r.ask("b".into(), 0.12, 0.02) && !r.ask("c".into(), 0.12, 0.02), "the others wait");
        assert!(r.admit_waiting(0.02).is_empty(), "a is still in flight");
        r.release("a");
        assert_eq!(r.admit_waiting(0.014), ["b"], "then the first that asked, alone");
        r.release("b");
        assert_eq!(r.take_waiting(), [("c".to_string(), 0.12)], "the budget reached: c waits for the approval");
        // Small worst cases go together, as far as the room takes them.
        let mut r = Reservations::default();
        assert!(r.ask("a".into(), 0.004, 0.01) && r.ask("b".into(), 0.004, 0.01));
        assert!(!r.ask("c".into(), 0.004, 0.01), "0.012 would pass 0.01");
        r.release("a");
        assert_eq!(r.admit_waiting(0.01), ["c"]);
        r.forget("c");
        assert!(r.admit_waiting(0.01).is_empty() && r.take_waiting().is_empty(), "c is gone");
        assert!(r.ask("b".into(), 0.004, 0.01), "asking again ends its earlier request");
    }
}
