// grad!(tape; x: [B, 3], w: [4, 2], b: [5]; let a = x @ w; (a + b, softmax(x, 2), relu(2.0)))

fn expansion() {
    {
        ::core::compile_error! {
            "`x` of `relu` must be a tensor, but it is `2.0`"
        }
    }
}
