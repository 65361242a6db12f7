//! Tokens back to the text a user would write, for messages that echo their
//! own code (`max_reattempts = 5`, `matching(CardDeclined)`,
//! `StepCx<Order>`): spaces around `=` and after `,`, none inside a path or
//! before a parenthesis, as rustfmt would write it.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use quote::ToTokens;

/// `node` as a user would write it.
pub(crate) fn code(node: &impl ToTokens) -> String {
    let mut out = String::new();
    write(node.to_token_stream(), &mut out);
    out
}

fn write(tokens: TokenStream, out: &mut String) {
    // Whether the last token was a word (identifier, literal, closing bracket)
    // that the next word must be kept apart from.
    let mut after_word = false;
    // An operator of several characters (`::`, `->`, `==`) arrives as joint
    // punctuation; it is written once whole.
    let mut operator = String::new();
    for tree in tokens {
        if let TokenTree::Punct(punct) = &tree {
            operator.push(punct.as_char());
            if punct.spacing() == Spacing::Joint {
                continue;
            }
            write_operator(&std::mem::take(&mut operator), out);
            after_word = false;
            continue;
        }
        if !operator.is_empty() {
            // A lifetime's quote is joint with the identifier that follows.
            write_operator(&std::mem::take(&mut operator), out);
            after_word = false;
        }
        // `name(...)`, `a[0]` read as one; `impl T { ... }` keeps its space.
        let call = matches!(&tree, TokenTree::Group(group)
            if matches!(group.delimiter(), Delimiter::Parenthesis | Delimiter::Bracket));
        if after_word && !call {
            out.push(' ');
        }
        match tree {
            TokenTree::Ident(ident) => out.push_str(&ident.to_string()),
            TokenTree::Literal(literal) => out.push_str(&literal.to_string()),
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                out.push_str(open);
                write(group.stream(), out);
                // A trailing `,` keeps no space before the bracket.
                let trimmed = out.trim_end().len();
                out.truncate(trimmed);
                out.push_str(close);
            }
            TokenTree::Punct(_) => {}
        }
        after_word = true;
    }
    write_operator(&operator, out);
}

fn write_operator(operator: &str, out: &mut String) {
    match operator {
        "" => {}
        "," | ";" => {
            out.push_str(operator);
            out.push(' ');
        }
        "=" | "==" | "!=" | "<=" | ">=" | "=>" | "->" | "+" | "|" | "||" | "&&" => {
            out.push(' ');
            out.push_str(operator);
            out.push(' ');
        }
        _ => out.push_str(operator),
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::code;

    #[test]
    fn tokens_read_as_written() {
        for (tokens, text) in [
            (quote!(max_reattempts = 5), "max_reattempts = 5"),
            (
                quote!(matching(CardDeclined, std::io::Error)),
                "matching(CardDeclined, std::io::Error)",
            ),
            (
                quote!(skip_if = Self::opted_out),
                "skip_if = Self::opted_out",
            ),
            (quote!(&mut StepCx<Vec<Order>>), "&mut StepCx<Vec<Order>>"),
            (quote!(wait = "5s"), "wait = \"5s\""),
            (quote!(priority = -3), "priority = -3"),
            (quote!(a == b), "a == b"),
            (quote!(x => y), "x => y"),
            (quote!(fn a(&self) -> u8), "fn a(&self) -> u8"),
            (quote!(impl Fulfil), "impl Fulfil"),
            (quote!(&'a mut T), "&'a mut T"),
            (quote!(matching(A, B,)), "matching(A, B,)"),
        ] {
            assert_eq!(code(&tokens), text);
        }
    }
}
