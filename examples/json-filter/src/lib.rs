//! # JSON filter (stateless)
//!
//! Readings as JSON lines → keep those at or above a threshold (parameter
//! `min`, default 20) → convert Celsius to Fahrenheit → JSON lines.
//!
//! ```text
//! weir run examples/json-filter --param output=/tmp/warm.jsonl --param min=25
//! ```

use serde::{Deserialize, Serialize};
use weir::{Context, OpenContext, Process};

/// A sensor reading.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Reading {
    /// Which sensor.
    pub sensor: String,
    /// The temperature in °C.
    pub celsius: f64,
}

/// The same reading in °F.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Fahrenheit {
    /// Which sensor.
    pub sensor: String,
    /// The temperature in °F.
    pub fahrenheit: f64,
}

/// Keeps readings at or above the `min` parameter (°C).
pub struct AtLeast {
    min: f64,
}

impl Process for AtLeast {
    type In = Reading;
    type Out = Reading;

    fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
        Ok(AtLeast {
            min: ctx.param_or("min", 20.0)?,
        })
    }

    fn process(&mut self, r: Reading, ctx: &mut Context<Reading>) -> weir::Result<()> {
        if r.celsius >= self.min {
            ctx.emit(r);
        }
        Ok(())
    }
}

/// Drops readings without a sensor name.
pub fn named(r: &Reading) -> bool {
    !r.sensor.is_empty()
}

/// Converts to Fahrenheit.
pub fn to_fahrenheit(r: Reading) -> Fahrenheit {
    Fahrenheit {
        sensor: r.sensor,
        fahrenheit: r.celsius * 9.0 / 5.0 + 32.0,
    }
}

weir::export_operators! {
    filter "named" => named;
    process "at-least" => AtLeast;
    map "to-fahrenheit" => to_fahrenheit;
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::testing::Harness;

    #[test]
    fn threshold_from_the_parameter() {
        let mut h = Harness::process_operator::<AtLeast>(&[("min", "25")]).unwrap();
        let cold = Reading {
            sensor: "a".into(),
            celsius: 24.9,
        };
        let warm = Reading {
            sensor: "a".into(),
            celsius: 25.0,
        };
        assert!(
            h.process::<_, _, Reading>(&(), &cold, None)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            h.process::<_, _, Reading>(&(), &warm, None).unwrap(),
            [warm]
        );
    }

    #[test]
    fn converts() {
        let mut h = Harness::map(to_fahrenheit);
        let out: Vec<Fahrenheit> = h
            .process(
                &(),
                &Reading {
                    sensor: "s".into(),
                    celsius: 100.0,
                },
                None,
            )
            .unwrap();
        assert_eq!(out[0].fahrenheit, 212.0);
    }
}
