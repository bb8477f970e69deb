"""``from plax.lax import <submodule>`` never reaches the plugin registry: a backend's module
that does so while plugins are being loaded (the CuPy backend's ``special_source``) must load."""
import subprocess
import sys
import textwrap


def test_submodule_import_while_plugins_load_does_not_touch_the_registry():
    # a fresh interpreter: plax.lax.special_series must not be imported already
    code = textwrap.dedent("""
        import sys
        from plax import plugins
        assert "plax.lax.special_series" not in sys.modules
        plugins._loading.append("test plugin")  # as discovery does around each hook
        try:
            from plax.lax import special_series
        finally:
            plugins._loading.pop()
        assert special_series.__name__ == "plax.lax.special_series"
        assert plugins._registry is None  # nothing was discovered on the way
        import plax.lax
        try:
            plax.lax.no_such_name_here
        except AttributeError:
            print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
