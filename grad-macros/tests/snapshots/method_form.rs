// grad!(tape; x.relu().softmax(-1).sum())

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::g_relu(__tape, x);
        let __t1 = ::grad_runtime::g_softmax(__tape, __t0, -1);
        ::grad_runtime::g_sum(__tape, __t1)
    }
}
