// grad!(tape; (softmax(x, -1), concat(a, b, 1), slice(x, [0, 0], [2, 3]), sum(x, 0, true), mean(x, -1)))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::g_softmax(__tape, x, -1);
        let __t1 = ::grad_runtime::g_concat(__tape, a, b, 1);
        let __t2 = ::grad_runtime::g_slice(__tape, x, &[0, 0], &[2, 3]);
        let __t3 = ::grad_runtime::g_sum_axis(__tape, x, 0, true);
        (__t0, __t1, __t2, __t3, ::grad_runtime::g_mean_axis(__tape, x, -1, false))
    }
}
