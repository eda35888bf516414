# Run in a code-interpreter context's python kernel (kernel-python.py) before its first cell: the
# bridge (kernel-bridge.py), given this source in its argv, writes it as agent_runner_startup.py
# on the kernel's PYTHONPATH, and the kernel imports it. It adds the display formats E2B's code
# interpreter adds to IPython's, so that a cell's results carry them. `e2b/chart` is a matplotlib
# figure as data (charts.py) and `e2b/data` a pandas DataFrame as columns; both are computed only
# for those objects, and only when the cell imported the library (sys.modules), so `1 + 1` pays
# for neither. A PIL image shown (Image.show()) or saved to a file is displayed, as in E2B's
# kernel.
import importlib.machinery
import os
import sys

from IPython import get_ipython
from IPython.core.formatters import BaseFormatter
from traitlets import ObjectName, Unicode


class ChartFormatter(BaseFormatter):
    format_type = Unicode("e2b/chart")
    print_method = ObjectName("_repr_e2b_chart_")
    _return_type = (dict,)

    def __call__(self, obj):
        if "matplotlib" not in sys.modules:
            return super().__call__(obj)
        from matplotlib.figure import Figure

        if not isinstance(obj, Figure):
            return super().__call__(obj)
        from agent_runner_charts import figure_chart

        try:
            return figure_chart(obj) or None
        except Exception:  # a figure this reader does not know keeps its image, without a chart
            return None


class DataFormatter(BaseFormatter):
    format_type = Unicode("e2b/data")
    print_method = ObjectName("_repr_e2b_data_")
    _return_type = (dict,)

    def __call__(self, obj):
        pandas = sys.modules.get("pandas")
        if pandas is None or not isinstance(obj, pandas.DataFrame):
            return super().__call__(obj)
        columns = obj.to_dict(orient="list")
        return {str(name): [value.isoformat() if isinstance(value, pandas.Timestamp) else value for value in values]
                for name, values in columns.items()}


class AfterImport:
    """A finder on sys.meta_path that runs a hook on a module once it has been imported (the
    regular finders find and load it): the PIL hooks below cost nothing to a cell that never
    imports PIL."""

    def __init__(self, hooks):
        self.hooks = hooks

    def find_spec(self, name, path=None, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        del self.hooks[name]
        exec_module = spec.loader.exec_module

        def exec_and_hook(module):
            exec_module(module)
            hook(module)

        spec.loader.exec_module = exec_and_hook
        return spec

    def invalidate_caches(self):
        pass


def image_show_hook(image_show):
    """PIL's Image.show() displays the image as a result (E2B's kernel does so): no viewer
    program runs, there is no screen."""
    from IPython.display import display

    class Displayed(image_show.Viewer):
        def show(self, image, **options):
            display(image)
            return 1

    image_show.register(Displayed, 0)


def image_hook(image_module):
    """An image saved to a file name is displayed too, as E2B's kernel does (a png result)."""
    from IPython.display import display

    save = image_module.Image.save

    def save_and_display(self, fp, format=None, **params):
        save(self, fp, format, **params)
        if isinstance(fp, (str, os.PathLike)):
            display(self)

    save_and_display.__doc__ = save.__doc__
    image_module.Image.save = save_and_display


sys.meta_path.insert(0, AfterImport({"PIL.ImageShow": image_show_hook, "PIL.Image": image_hook}))

shell = get_ipython()
formatter = shell.display_formatter
formatter.formatters["e2b/chart"] = ChartFormatter(parent=formatter)
formatter.formatters["e2b/data"] = DataFormatter(parent=formatter)
# A figure is shown as png, and svg too when asked (set_matplotlib_formats('png', 'svg')): read by
# matplotlib_inline when a cell first imports matplotlib, so `1 + 1` does not import it.
shell.config.InlineBackend.figure_formats = {"png"}
