//! Generates `impl Params for Name`: one `visitor.field::<Type>("name", &self.member)`
//! per field, in declaration order, so a field whose type is not a model
//! part is reported on that type by the trait's own message.

use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};

use super::parse::{GenericParam, Input};

pub(crate) fn expand(input: &Input) -> TokenStream {
    let name = &input.name;
    let impl_generics = input.generics.iter().map(|param| match param {
        GenericParam::Lifetime { decl, .. } | GenericParam::Const { decl, .. } => decl.clone(),
        GenericParam::Type { name, bounds } if bounds.is_empty() => quote!(#name: ::grad_runtime::Params),
        GenericParam::Type { name, bounds } => quote!(#name: #bounds + ::grad_runtime::Params),
    });
    let type_generics = input.generics.iter().map(|param| match param {
        GenericParam::Lifetime { name, .. } => name.clone(),
        GenericParam::Type { name, .. } | GenericParam::Const { name, .. } => quote!(#name),
    });
    let where_clause = &input.where_clause;
    let visits = input.fields.iter().filter(|field| !field.skip).map(|field| {
        let (member, ty) = (&field.member, &field.ty);
        let path_name = Literal::string(&field.name);
        if field.buffer {
            quote_spanned! {field.ty_span=>
                visitor.buffer::<#ty>(#path_name, &self.#member);
            }
        } else {
            quote_spanned! {field.ty_span=>
                visitor.field::<#ty>(#path_name, &self.#member);
            }
        }
    });
    quote! {
        impl<#(#impl_generics),*> ::grad_runtime::Params for #name<#(#type_generics),*> #where_clause {
            #[allow(unused_variables)] // a struct with no parameter field
            fn visit_params(&self, visitor: &mut ::grad_runtime::ParamVisitor<'_>) {
                #(#visits)*
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::super::parse::parse;
    use super::expand;

    #[test]
    fn one_visit_per_field_and_params_bounds_on_type_parameters() {
        let input = parse(quote! {
            struct Net<'a, L: Clone = Dense, const N: usize = 2> where L: Default {
                layers: Vec<L>,
                #[params(rename = "weight")] w: Var,
                #[params(skip)] name: &'a str,
                last: [Dense; N],
                #[params(buffer)] count: Var,
            }
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
        let text = expand(&input).to_string();
        assert!(text.starts_with(
            "impl < 'a , L : Clone + :: grad_runtime :: Params , const N : usize > :: grad_runtime :: Params \
             for Net < 'a , L , N > where L : Default {"
        ));
        assert!(text.contains("visitor . field :: < Vec < L > > (\"layers\" , & self . layers) ;"), "{text}");
        assert!(text.contains("visitor . field :: < Var > (\"weight\" , & self . w) ;"), "{text}");
        assert!(!text.contains("name"), "{text}");
        assert!(text.contains("visitor . field :: < [Dense ; N] > (\"last\" , & self . last) ;"), "{text}");
        assert!(text.contains("visitor . buffer :: < Var > (\"count\" , & self . count) ;"), "{text}");
    }

    #[test]
    fn tuple_struct_members_are_indices() {
        let input = parse(quote! { struct Seq(Dense, Dense); }).unwrap_or_else(|e| panic!("{e:?}"));
        let text = expand(&input).to_string();
        assert!(text.contains("(\"0\" , & self . 0)") && text.contains("(\"1\" , & self . 1)"), "{text}");
    }
}
