//! The small expression language of built-in `select` operators: JSON
//! pointers into the record, numbers, arithmetic and comparisons.
//!
//! ```text
//! condition  := comparison ("and" comparison)*
//! comparison := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?
//! sum        := product (("+" | "-") product)*
//! product    := operand (("*" | "/" | "%") operand)*
//! operand    := number | pointer | "(" sum ")" | "-" operand
//! pointer    := "/" followed by anything but spaces, parentheses and operators
//! ```
//!
//! A pointer names a field of the record (`/price`, `/user/id`); a missing
//! or `null` field is null, and so is arithmetic on it (as in SQL). A
//! comparison with a null is false.

use serde::{Deserialize, Serialize};

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expr {
    /// A number.
    Number(f64),
    /// A whole number.
    Integer(i64),
    /// The record's field at a JSON pointer.
    Field(String),
    /// `-x`.
    Negate(Box<Expr>),
    /// `a op b`.
    Binary(Box<Expr>, BinaryOp, Box<Expr>),
}

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BinaryOp {
    /// `+`
    Add,
    /// `-`
    Subtract,
    /// `*`
    Multiply,
    /// `/` (always a floating-point division)
    Divide,
    /// `%` (whole numbers: the remainder with the dividend's sign)
    Remainder,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Comparison {
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
    /// `<`
    Less,
    /// `<=`
    LessOrEqual,
    /// `>`
    Greater,
    /// `>=`
    GreaterOrEqual,
}

/// A condition: comparisons joined by `and` (an expression alone holds when
/// it is a number other than zero).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// All must hold.
    pub all: Vec<(Expr, Option<(Comparison, Expr)>)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(String),
    Field(String),
    Op(&'static str),
    Open,
    Close,
    And,
}

const OPERATORS: [&str; 11] = ["==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%"];

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let c = rest.chars().next().expect("not empty");
        let (token, len) = if c == '(' {
            (Token::Open, 1)
        } else if c == ')' {
            (Token::Close, 1)
        } else if c == '/'
            && rest[1..]
                .chars()
                .next()
                .is_some_and(|n| !n.is_whitespace() && !"()".contains(n))
            && !matches!(
                out.last(),
                Some(Token::Number(_) | Token::Field(_) | Token::Close)
            )
        {
            // A pointer where an operand is expected: up to a space, a
            // parenthesis or an operator character.
            let end = rest[1..]
                .find(|n: char| n.is_whitespace() || "()+*%<>=!".contains(n))
                .map_or(rest.len(), |i| i + 1);
            (Token::Field(rest[..end].to_owned()), end)
        } else if c.is_ascii_digit() || c == '.' {
            let end = rest
                .find(|n: char| !(n.is_ascii_alphanumeric() || n == '.'))
                .unwrap_or(rest.len());
            (Token::Number(rest[..end].to_owned()), end)
        } else if let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(**op)) {
            (Token::Op(op), op.len())
        } else if rest.starts_with("and") && !rest[3..].starts_with(|n: char| n.is_alphanumeric()) {
            (Token::And, 3)
        } else {
            return Err(format!("unexpected `{c}` at `{rest}`"));
        };
        out.push(token);
        rest = rest[len..].trim_start();
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn op(&mut self, choices: &[&str]) -> Option<&'static str> {
        match self.peek() {
            Some(Token::Op(op)) if choices.contains(op) => {
                let op = *op;
                self.at += 1;
                Some(op)
            }
            _ => None,
        }
    }

    fn operand(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Number(n)) => match n.parse::<i64>() {
                Ok(i) => Ok(Expr::Integer(i)),
                Err(_) => n
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map(Expr::Number)
                    .ok_or_else(|| format!("`{n}` is not a number")),
            },
            Some(Token::Field(p)) => Ok(Expr::Field(p)),
            Some(Token::Open) => {
                let e = self.sum()?;
                match self.next() {
                    Some(Token::Close) => Ok(e),
                    _ => Err("a `(` is not closed".into()),
                }
            }
            Some(Token::Op("-")) => Ok(Expr::Negate(Box::new(self.operand()?))),
            Some(t) => Err(format!("expected a number, a /pointer or `(`, not {t:?}")),
            None => Err("it ends where a number, a /pointer or `(` is expected".into()),
        }
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut e = self.operand()?;
        while let Some(op) = self.op(&["*", "/", "%"]) {
            let op = match op {
                "*" => BinaryOp::Multiply,
                "/" => BinaryOp::Divide,
                _ => BinaryOp::Remainder,
            };
            e = Expr::Binary(Box::new(e), op, Box::new(self.operand()?));
        }
        Ok(e)
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut e = self.product()?;
        while let Some(op) = self.op(&["+", "-"]) {
            let op = if op == "+" {
                BinaryOp::Add
            } else {
                BinaryOp::Subtract
            };
            e = Expr::Binary(Box::new(e), op, Box::new(self.product()?));
        }
        Ok(e)
    }

    fn end(&self) -> Result<(), String> {
        match self.peek() {
            None => Ok(()),
            Some(t) => Err(format!("unexpected {t:?} after a complete expression")),
        }
    }
}

/// Parse an arithmetic expression.
pub fn parse_expr(text: &str) -> Result<Expr, String> {
    let mut p = Parser {
        tokens: tokens(text)?,
        at: 0,
    };
    let e = p.sum()?;
    p.end()?;
    Ok(e)
}

/// Parse a condition.
pub fn parse_condition(text: &str) -> Result<Condition, String> {
    let mut p = Parser {
        tokens: tokens(text)?,
        at: 0,
    };
    let mut all = Vec::new();
    loop {
        let left = p.sum()?;
        let cmp = p
            .op(&["==", "!=", "<", "<=", ">", ">="])
            .map(|op| match op {
                "==" => Comparison::Equal,
                "!=" => Comparison::NotEqual,
                "<" => Comparison::Less,
                "<=" => Comparison::LessOrEqual,
                ">" => Comparison::Greater,
                _ => Comparison::GreaterOrEqual,
            });
        let right = match cmp {
            Some(c) => Some((c, p.sum()?)),
            None => None,
        };
        all.push((left, right));
        if p.peek() == Some(&Token::And) {
            p.at += 1;
        } else {
            break;
        }
    }
    p.end()?;
    Ok(Condition { all })
}

impl Expr {
    /// The JSON pointers it reads.
    pub fn fields(&self, out: &mut Vec<String>) {
        match self {
            Expr::Field(p) => {
                if !out.contains(p) {
                    out.push(p.clone());
                }
            }
            Expr::Negate(e) => e.fields(out),
            Expr::Binary(a, _, b) => {
                a.fields(out);
                b.fields(out);
            }
            Expr::Number(_) | Expr::Integer(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(p: &str) -> Box<Expr> {
        Box::new(Expr::Field(p.into()))
    }

    #[test]
    fn expressions_parse_with_precedence() {
        assert_eq!(parse_expr("/price").unwrap(), Expr::Field("/price".into()));
        assert_eq!(
            parse_expr("0.908 * /price").unwrap(),
            Expr::Binary(
                Box::new(Expr::Number(0.908)),
                BinaryOp::Multiply,
                f("/price")
            )
        );
        assert_eq!(
            parse_expr("/a + /b*2").unwrap(),
            Expr::Binary(
                f("/a"),
                BinaryOp::Add,
                Box::new(Expr::Binary(
                    f("/b"),
                    BinaryOp::Multiply,
                    Box::new(Expr::Integer(2))
                ))
            )
        );
        // After an operand, `/` divides.
        assert_eq!(
            parse_expr("(/a + 1) / /b").unwrap(),
            Expr::Binary(
                Box::new(Expr::Binary(
                    f("/a"),
                    BinaryOp::Add,
                    Box::new(Expr::Integer(1))
                )),
                BinaryOp::Divide,
                f("/b")
            )
        );
        assert_eq!(
            parse_expr("-/user/age").unwrap(),
            Expr::Negate(f("/user/age"))
        );
    }

    #[test]
    fn conditions_parse() {
        let c = parse_condition("/id % 2 == 0 and /price >= 10").unwrap();
        assert_eq!(c.all.len(), 2);
        assert_eq!(
            c.all[0],
            (
                Expr::Binary(f("/id"), BinaryOp::Remainder, Box::new(Expr::Integer(2))),
                Some((Comparison::Equal, Expr::Integer(0)))
            )
        );
        assert_eq!(c.all[1].1.as_ref().unwrap().0, Comparison::GreaterOrEqual);
    }

    #[test]
    fn mistakes_are_named() {
        assert!(parse_expr("").unwrap_err().contains("ends where"));
        assert!(parse_expr("/a +").unwrap_err().contains("ends where"));
        assert!(parse_expr("(/a").unwrap_err().contains("not closed"));
        assert!(parse_expr("/a /b").unwrap_err().contains("unexpected"));
        assert!(parse_expr("price").unwrap_err().contains("unexpected `p`"));
        assert!(parse_expr("1e999").unwrap_err().contains("not a number"));
        assert!(
            parse_condition("/a == ")
                .unwrap_err()
                .contains("ends where")
        );
    }
}
