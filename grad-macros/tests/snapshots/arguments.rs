// grad!(tape; (softmax(x, -1), concat(a, b, 1), slice(x, [0, 0], [2, 3]), sum(x, 0, true), mean(x, -1)))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        (
            ::grad_runtime::g_softmax(__tape, x, -1),
            ::grad_runtime::g_concat(__tape, a, b, 1),
            ::grad_runtime::g_slice(__tape, x, &[0, 0], &[2, 3]),
            ::grad_runtime::g_sum_axis(__tape, x, 0, true),
            ::grad_runtime::g_mean_axis(__tape, x, -1, false),
        )
    }
}
