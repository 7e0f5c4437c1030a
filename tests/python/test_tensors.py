"""headlab.Tensor and NumPy share memory both ways, and either side may go first."""

import gc
import weakref

import numpy as np
import pytest

import headlab


def test_numpy_view_of_a_tensor_shares_memory_both_ways():
    t = headlab.Tensor.zeros([2, 3])
    a = np.asarray(t)
    assert a.shape == (2, 3) and a.dtype == np.float32
    a[1, 2] = 7.0
    assert t.tolist() == [[0, 0, 0], [0, 0, 7]]
    b = t.numpy()
    assert np.shares_memory(a, b)
    b[0, 0] = -1.0
    assert a[0, 0] == -1.0


def test_tensor_from_a_float32_array_views_it():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for t in (headlab.Tensor(a), headlab.from_numpy(a)):
        assert t.shape == (2, 3) and t.numel == 6 and t.ndim == 2 and t.dtype == np.float32
        a[0, 1] = 10.0
        assert np.asarray(t)[0, 1] == 10.0
        np.asarray(t)[1, 0] = 20.0
        assert a[1, 0] == 20.0
        assert np.shares_memory(np.asarray(t), a)


def test_the_array_outlives_the_tensor_and_the_tensor_the_array():
    # A view made from a Tensor keeps its memory after the Tensor object goes.
    t = headlab.Tensor.full([1000], 3.0)
    view = np.asarray(t)
    del t
    gc.collect()
    big = [headlab.Tensor.full([1000], 9.0) for _ in range(4)]  # reuse of freed buffers
    assert np.all(view == 3.0)
    del big

    # A Tensor made from an array keeps the array alive after the caller drops it.
    a = np.full(1000, 5.0, dtype=np.float32)
    ref = weakref.ref(a)
    t = headlab.from_numpy(a)
    del a
    gc.collect()
    assert np.all(np.asarray(t) == 5.0)
    # Once the Tensor goes, nothing holds the array any more.
    del t
    gc.collect()
    assert ref() is None


def test_a_tensor_over_a_slice_keeps_the_slice_base_alive():
    big = np.arange(10, dtype=np.float32)
    middle = big[2:6]  # C-contiguous, its memory owned by big
    var = headlab.Var(middle)
    del big, middle
    gc.collect()
    assert var.numpy().tolist() == [2, 3, 4, 5]


@pytest.mark.parametrize(
    "array, problem",
    [
        (np.zeros((2, 2), dtype=np.float64), "dtype is float64 but expected float32"),
        (np.zeros((3, 4), dtype=np.float32)[:, ::2], "not C-contiguous"),
        (np.zeros((2, 2), dtype=np.float32).T, "not C-contiguous"),
    ],
)
def test_arrays_that_cannot_be_viewed_raise_unless_copied(array, problem):
    with pytest.raises(headlab.Error, match=problem):
        headlab.Tensor(array)
    with pytest.raises(headlab.Error, match="from_numpy: "):
        headlab.from_numpy(array)
    copied = headlab.Tensor(array, copy=True)
    assert np.array_equal(np.asarray(copied), array.astype(np.float32))
    assert not np.shares_memory(np.asarray(copied), array)


def test_read_only_arrays_are_refused_not_silently_shared():
    a = np.zeros(3, dtype=np.float32)
    a.setflags(write=False)
    with pytest.raises(headlab.Error, match="read-only"):
        headlab.Tensor(a)
    assert headlab.Tensor(a, copy=True).tolist() == [0, 0, 0]


def test_lists_and_numbers_are_copied_and_non_numbers_refused():
    assert headlab.Tensor([[1, 2], [3, 4.5]]).tolist() == [[1, 2], [3, 4.5]]
    assert headlab.Tensor(2.5).item() == 2.5
    with pytest.raises(headlab.Error, match="Tensor: .*not numeric"):
        headlab.Tensor("abc")
    with pytest.raises(headlab.Error, match="at most 6"):
        headlab.Tensor(np.zeros((1,) * 7, dtype=np.float32))


def test_copy_true_never_shares():
    a = np.ones(3, dtype=np.float32)
    t = headlab.Tensor(a, copy=True)
    a[0] = 5
    assert t.tolist() == [1, 1, 1]


def test_repr_shape_and_clone():
    t = headlab.Tensor(np.array([[1, 2]], dtype=np.float32))
    assert repr(t) == "headlab.Tensor([[1., 2.]], shape=[1, 2])"
    c = t.clone()
    assert not c.shares_memory(t) and c.tolist() == t.tolist()
    assert len(t) == 1
    with pytest.raises(headlab.Error, match="item: tensor of shape \\[1, 2\\] has 2 elements"):
        t.item()


def test_the_last_handle_may_go_inside_backward_with_the_gil_released():
    # mul keeps its input for backward; the array's last C++ handle then goes when backward
    # clears the tape, inside the call that released the GIL: the release takes the GIL back.
    w = headlab.Var(np.ones(4, dtype=np.float32), requires_grad=True)
    a = np.full(4, 2.0, dtype=np.float32)
    ref = weakref.ref(a)
    y = headlab.Var(a) * w
    del a
    gc.collect()
    assert ref() is not None  # the tape's saved input holds it
    loss = y.sum()
    del y
    loss.backward()
    gc.collect()
    assert ref() is None  # released by backward itself
    assert w.grad.tolist() == [2.0, 2.0, 2.0, 2.0]
