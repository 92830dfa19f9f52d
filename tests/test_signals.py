"""The one stop-signal mechanism (gradcli.core.signals), in-process: a signal that lands inside a
callback whose exceptions Python ignores must still stop the run, not be printed and lost."""
import os
import signal
import weakref

import pytest

from gradcli.core import signals


def test_a_signal_inside_an_ignored_callback_still_stops_the_run(capfd):
    class Thing:
        pass

    def callback(_):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs here, inside the callback: its exception is unraisable
            pass

    with pytest.raises(KeyboardInterrupt):
        with signals.watching_signals():
            thing = Thing()
            ref = weakref.ref(thing, callback)
            del thing
            for _ in range(10_000_000):  # the signal, delivered again, stops the run here
                pass
    assert ref() is None
    assert signals.stop_exit_status() == 130
    assert "Exception ignored" not in capfd.readouterr().err


def test_later_signals_are_recorded_not_raised_while_winding_down():
    with signals.watching_signals():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10_000_000):
                pass
        os.kill(os.getpid(), signal.SIGINT)  # a second signal: swallowed, the first one is the status
        for _ in range(100_000):
            pass
        assert signals.stop_exit_status() == 143 and signals.stop_message() == "terminated: SIGTERM"


def test_a_stop_while_stops_are_deferred_is_raised_where_they_resume():
    """A signal while a command is loaded (deferred) must not be lost: the command raises it as it starts."""
    with signals.watching_signals():
        with signals.stops_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100_000):  # the handler runs here and records it, raising nothing
                pass
            assert signals.stop_pending() and signals.stop_exit_status() == 143
            with pytest.raises(KeyboardInterrupt):
                with signals.stops_resumed():
                    pytest.fail("the block must not run once a stop is pending")
            assert not signals.stop_pending()
            with signals.stops_resumed():  # raised once, not again
                pass
        assert signals.stop_exit_status() == 143
