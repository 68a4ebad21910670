//! The resource expressions of a SidecarSet's `resourcesPolicy` (upstream
//! `pkg/util/calculator`): `+ - * /`, parentheses, unary minus, `max(a, b)`, `min(a, b)`,
//! numbers, percentages (`50%` is 0.5), quantities (`50m`, `100Mi`) and one variable. Numbers
//! and quantities mix as upstream's do: a sum with a quantity is a quantity, a quantity may be
//! multiplied or divided only by a number, and the result must not be negative. Quantities are
//! kept in millis, as upstream computes them (`MilliValue`).

use std::collections::BTreeMap;

/// A Kubernetes quantity in millis, and whether it is written in base 1024 (Go keeps the
/// format of the left operand, or of the right when the left is zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantity {
    /// The value × 1000.
    pub milli: i128,
    /// Written with a binary suffix (`Ki`, `Mi`, …).
    pub binary: bool,
}

/// A value of an expression.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A plain number (percentages included).
    Number(f64),
    /// A quantity.
    Quantity(Quantity),
}

/// Why an expression cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ExprError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ExprError> {
    Err(ExprError(msg.into()))
}

const BINARY: [(&str, u32); 6] = [
    ("Ki", 1),
    ("Mi", 2),
    ("Gi", 3),
    ("Ti", 4),
    ("Pi", 5),
    ("Ei", 6),
];
const DECIMAL: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

impl Quantity {
    /// A decimal quantity of `milli` millis.
    pub fn decimal(milli: i128) -> Self {
        Quantity {
            milli,
            binary: false,
        }
    }

    /// Parses a quantity as the API server accepts it (`1.5Gi`, `250m`, `2`, `1e3`); values
    /// below a milli round up, as Go's `MilliValue` does.
    pub fn parse(s: &str) -> Option<Self> {
        let q = kruise_api::vct_hash::parse_quantity(s)?;
        Some(Quantity {
            milli: q.milli()?,
            binary: q.binary_power > 0,
        })
    }

    /// The quantity as Go's `Quantity.String` writes it: base 1024 while the value is a whole
    /// number of at least 1024 in a binary format, otherwise the largest power of 1000 that
    /// leaves a whole mantissa.
    pub fn canonical(&self) -> String {
        let m = self.milli;
        if m == 0 {
            return "0".to_owned();
        }
        if self.binary && m % 1000 == 0 && (m / 1000).abs() >= 1024 {
            let mut v = m / 1000;
            let mut suffix = "";
            for (u, _) in BINARY {
                if v % 1024 != 0 {
                    break;
                }
                v /= 1024;
                suffix = u;
            }
            return format!("{v}{suffix}");
        }
        let (mut v, mut exp) = (m, -3);
        while v % 1000 == 0 && exp < 18 {
            v /= 1000;
            exp += 3;
        }
        let suffix = DECIMAL
            .iter()
            .find(|(_, e)| *e == exp)
            .map_or("", |(u, _)| u);
        format!("{v}{suffix}")
    }
}

/// Go's `int64(f)`: toward zero.
fn trunc(f: f64) -> i128 {
    i128::from(f.trunc() as i64)
}

fn to_quantity(v: Value) -> Quantity {
    match v {
        Value::Quantity(q) => q,
        Value::Number(n) => Quantity::decimal(trunc(n * 1000.0)),
    }
}

fn add(l: Value, r: Value) -> Value {
    match (l, r) {
        (Value::Number(a), Value::Number(b)) => Value::Number(a + b),
        _ => {
            let (a, b) = (to_quantity(l), to_quantity(r));
            Value::Quantity(Quantity {
                milli: a.milli + b.milli,
                binary: if a.milli == 0 { b.binary } else { a.binary },
            })
        }
    }
}

fn neg(v: Value) -> Value {
    match v {
        Value::Number(n) => Value::Number(-n),
        Value::Quantity(q) => Value::Quantity(Quantity {
            milli: -q.milli,
            ..q
        }),
    }
}

fn scale(q: Quantity, f: impl Fn(f64) -> f64) -> Value {
    Value::Quantity(Quantity {
        milli: trunc(f(q.milli as f64)),
        ..q
    })
}

fn mul(l: Value, r: Value) -> Result<Value, ExprError> {
    match (l, r) {
        (Value::Quantity(_), Value::Quantity(_)) => err("multiplication of two quantities"),
        (Value::Quantity(q), Value::Number(n)) | (Value::Number(n), Value::Quantity(q)) => {
            Ok(scale(q, |m| m * n))
        }
        (Value::Number(a), Value::Number(b)) => Ok(Value::Number(a * b)),
    }
}

fn div(l: Value, r: Value) -> Result<Value, ExprError> {
    match (l, r) {
        (_, Value::Quantity(_)) => err("division by quantity"),
        (_, Value::Number(0.0)) => err("division by zero"),
        (Value::Quantity(q), Value::Number(n)) => Ok(scale(q, |m| m / n)),
        (Value::Number(a), Value::Number(b)) => Ok(Value::Number(a / b)),
    }
}

/// `max` (`larger`) or `min`: numbers stay numbers; otherwise the chosen operand as a
/// quantity, ties going to the left one.
fn pick(l: Value, r: Value, larger: bool) -> Value {
    if let (Value::Number(a), Value::Number(b)) = (l, r) {
        let left = if larger { a >= b } else { a <= b };
        return Value::Number(if left { a } else { b });
    }
    let (a, b) = (to_quantity(l), to_quantity(r));
    let left = if larger {
        a.milli >= b.milli
    } else {
        a.milli <= b.milli
    };
    Value::Quantity(if left { a } else { b })
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Number(f64),
    Quantity(Quantity),
    Ident(String),
    Op(char),
}

/// Splits `input` into tokens. A number runs over digits, one dot, an exponent, a percent sign
/// and then letters (a unit): with one of the units upstream accepts it is a quantity.
fn tokens(input: &str) -> Result<Vec<Token>, ExprError> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if "+-*/(),".contains(c) {
            out.push(Token::Op(c));
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            i = number_end(&chars, i);
            let text: String = chars[start..i].iter().collect();
            out.push(number_token(&text)?);
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            return err(format!("unexpected character {c:?}"));
        }
    }
    Ok(out)
}

fn number_end(chars: &[char], mut i: usize) -> usize {
    let (mut dot, mut exp, mut percent, mut want_exp_digit) = (false, false, false, false);
    while let Some(&c) = chars.get(i) {
        if c.is_ascii_digit() {
            want_exp_digit = false;
        } else if c == '.' && !dot && !exp && !percent {
            dot = true;
        } else if (c == 'e' || c == 'E') && !exp && !percent {
            exp = true;
            want_exp_digit = true;
        } else if (c == '+' || c == '-') && want_exp_digit {
            want_exp_digit = false;
        } else if c == '%' && !percent {
            percent = true;
        } else if c.is_alphabetic() && !want_exp_digit {
            while chars.get(i).is_some_and(|c| c.is_alphabetic()) {
                i += 1;
            }
            return i;
        } else {
            return i;
        }
        i += 1;
    }
    i
}

fn number_token(text: &str) -> Result<Token, ExprError> {
    let unit_at = text
        .find(|c: char| !(c.is_ascii_digit() || ".eE+-".contains(c)))
        .unwrap_or(text.len());
    const UNITS: [&str; 11] = ["m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "Pi"];
    if unit_at > 0 && UNITS.contains(&&text[unit_at..]) {
        return Quantity::parse(text)
            .map(Token::Quantity)
            .ok_or_else(|| ExprError(format!("invalid quantity {text:?}")));
    }
    let (digits, factor) = match text.strip_suffix('%') {
        Some(d) => (d, 0.01),
        None => (text, 1.0),
    };
    // Upstream reads an unknown unit (`100Mb`) as 0; refusing it is kinder.
    match digits.parse::<f64>() {
        Ok(n) if n.is_finite() => Ok(Token::Number(n * factor)),
        _ => err(format!("invalid number or quantity {text:?}")),
    }
}

struct Parser<'a> {
    tokens: Vec<Token>,
    pos: usize,
    vars: &'a BTreeMap<&'a str, Value>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Token::Op(op)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: char) -> Result<(), ExprError> {
        if self.eat(op) {
            Ok(())
        } else {
            err(format!("parse error: expected {op:?}"))
        }
    }

    fn expr(&mut self) -> Result<Value, ExprError> {
        let mut v = self.term()?;
        loop {
            if self.eat('+') {
                v = add(v, self.term()?);
            } else if self.eat('-') {
                v = add(v, neg(self.term()?));
            } else {
                return Ok(v);
            }
        }
    }

    fn term(&mut self) -> Result<Value, ExprError> {
        let mut v = self.factor()?;
        loop {
            if self.eat('*') {
                v = mul(v, self.factor()?)?;
            } else if self.eat('/') {
                v = div(v, self.factor()?)?;
            } else {
                return Ok(v);
            }
        }
    }

    fn factor(&mut self) -> Result<Value, ExprError> {
        let Some(t) = self.peek().cloned() else {
            return err("parse error: unexpected end of expression");
        };
        self.pos += 1;
        match t {
            Token::Number(n) => Ok(Value::Number(n)),
            Token::Quantity(q) => Ok(Value::Quantity(q)),
            Token::Op('-') => Ok(neg(self.factor()?)),
            Token::Op('(') => {
                let v = self.expr()?;
                self.expect(')')?;
                Ok(v)
            }
            Token::Op(c) => err(format!("parse error: unexpected {c:?}")),
            Token::Ident(name) if self.eat('(') => self.call(&name),
            Token::Ident(name) => self
                .vars
                .get(name.to_lowercase().as_str())
                .copied()
                .ok_or_else(|| ExprError(format!("undefined variable: {name}"))),
        }
    }

    fn call(&mut self, name: &str) -> Result<Value, ExprError> {
        let mut args = vec![self.expr()?];
        if self.eat(',') {
            args.push(self.expr()?);
        }
        self.expect(')')?;
        let larger = match name.to_lowercase().as_str() {
            "max" => true,
            "min" => false,
            _ => return err(format!("unknown function: {name}")),
        };
        match args[..] {
            [l, r] => Ok(pick(l, r, larger)),
            _ => err(format!(
                "{} function requires exactly 2 arguments, got {}",
                name.to_lowercase(),
                args.len()
            )),
        }
    }
}

/// Evaluates `expr` with `vars` (names in lower case); a negative result is an error.
pub fn evaluate(expr: &str, vars: &BTreeMap<&str, Value>) -> Result<Value, ExprError> {
    let mut p = Parser {
        tokens: tokens(expr)?,
        pos: 0,
        vars,
    };
    let v = p.expr()?;
    if let Some(t) = p.peek() {
        return err(format!("parse error: unexpected {t:?}"));
    }
    let negative = match v {
        Value::Number(n) => n < 0.0,
        Value::Quantity(q) => q.milli < 0,
    };
    if negative {
        return err(format!(
            "calculation result is negative: {}",
            match v {
                Value::Number(n) => n.to_string(),
                Value::Quantity(q) => format!(
                    "-{}",
                    Quantity {
                        milli: -q.milli,
                        ..q
                    }
                    .canonical()
                ),
            }
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).expect(s)
    }

    fn eval(expr: &str, var: Option<(&str, &str)>) -> Result<String, ExprError> {
        let vars: BTreeMap<&str, Value> = var
            .map(|(n, v)| (n, Value::Quantity(q(v))))
            .into_iter()
            .collect();
        evaluate(expr, &vars).map(|v| match v {
            Value::Number(n) => format!("#{n}"),
            Value::Quantity(q) => q.canonical(),
        })
    }

    #[test]
    fn quantities_parse_and_print_as_go_does() {
        for (input, out) in [
            ("100m", "100m"),
            ("0.5", "500m"),
            ("2", "2"),
            ("1500m", "1500m"),
            ("2000", "2k"),
            ("100Mi", "100Mi"),
            ("1.5Gi", "1536Mi"),
            ("1024", "1024"),
            ("512", "512"),
            ("1e3", "1k"),
            ("1n", "1m"),
            ("0", "0"),
        ] {
            assert_eq!(q(input).canonical(), out, "{input}");
        }
        // Base 1024 only for whole values of at least 1Ki.
        let half_ki = Quantity {
            milli: 512_000,
            binary: true,
        };
        assert_eq!(half_ki.canonical(), "512");
        assert!(Quantity::parse("12x").is_none());
    }

    #[test]
    fn arithmetic_of_numbers_percentages_and_quantities() {
        let cpu = Some(("cpu", "200m"));
        assert_eq!(eval("max(cpu*50%, 50m)", cpu).as_deref(), Ok("100m"));
        assert_eq!(eval("max(cpu*50%, 150m)", cpu).as_deref(), Ok("150m"));
        assert_eq!(eval("min(cpu, 50m)", cpu).as_deref(), Ok("50m"));
        assert_eq!(eval("cpu*50% + 100m", cpu).as_deref(), Ok("200m"));
        assert_eq!(eval("cpu / 4", cpu).as_deref(), Ok("50m"));
        assert_eq!(eval("-(-cpu)", cpu).as_deref(), Ok("200m"));
        assert_eq!(eval("2 + 3 * 4", None).as_deref(), Ok("#14"));
        assert_eq!(eval("(2 + 3) * 4", None).as_deref(), Ok("#20"));
        assert_eq!(eval("10 - 2 - 3", None).as_deref(), Ok("#5"));
        assert_eq!(eval("cpu + 1", cpu).as_deref(), Ok("1200m"));
        let mem = Some(("memory", "400Mi"));
        assert_eq!(
            eval("max(memory*20% + 100Mi, 200Mi)", mem).as_deref(),
            Ok("200Mi")
        );
        assert_eq!(eval("memory*50%", mem).as_deref(), Ok("200Mi"));
        assert_eq!(eval("MEMORY*15% + 50Mi", mem).as_deref(), Ok("110Mi"));
        // A zero left operand takes the right one's format.
        let zero = Some(("memory", "0"));
        assert_eq!(eval("memory + 100Mi", zero).as_deref(), Ok("100Mi"));
        // A piecewise-linear form (upstream's documentation example).
        let cpu4 = Some(("cpu", "10"));
        assert_eq!(
            eval("0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", cpu4).as_deref(),
            Ok("3800m")
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let cpu = Some(("cpu", "200m"));
        let msg = |e: &str| eval(e, cpu).expect_err(e).0;
        assert_eq!(msg("cpu * 2m"), "multiplication of two quantities");
        assert_eq!(msg("cpu / 2m"), "division by quantity");
        assert_eq!(msg("cpu / 0"), "division by zero");
        assert_eq!(msg("memory * 2"), "undefined variable: memory");
        assert_eq!(msg("avg(cpu, 1)"), "unknown function: avg");
        assert_eq!(
            msg("max(cpu)"),
            "max function requires exactly 2 arguments, got 1"
        );
        assert!(msg("cpu - 1").starts_with("calculation result is negative"));
        assert!(msg("cpu *").starts_with("parse error"));
        assert!(msg("(cpu").starts_with("parse error"));
        assert!(msg("cpu cpu").starts_with("parse error"));
        assert!(msg("100Mb").contains("100Mb"));
        assert!(msg("cpu # 2").contains("unexpected character"));
    }
}
