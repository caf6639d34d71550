"""Heat maps of the default over the synthetic grid: RoundRobin's cost / the default's to mean
loss 0.02 and 0.01, and the best other policy's (oracle excluded) / the default's (>= 1: the
default is first), min-max over seeds. Writes grid.svg (hand-written SVG, no plotting library)."""
import json, os, sys
folder = sys.argv[1]
sigmas = ['0.01', '0.1', '0.5', '1.0']
alphas = ['0.01', '0.1', '1.0']
levels = ['0.02', '0.01']
def ratios(sa, level, kind):
    out = []
    for s in (0, 1, 2):
        f = os.path.join(folder, f'syn{sa[0]}_{sa[1]}-s{s}.json')
        if not os.path.exists(f):
            return None
        pol = json.load(open(f))['policies']
        d = pol['default']['cost_to_mean_loss'].get(level)
        if kind == 'rr':
            o = pol['round_robin']['cost_to_mean_loss'].get(level)
        else:
            vals = [v['cost_to_mean_loss'].get(level) for p, v in pol.items()
                    if p not in ('default', 'default_identity_scale', 'oracle_user')]
            vals = [v for v in vals if v is not None]
            o = min(vals) if vals else None
        if d is None:
            out.append(0.0)
        elif o is None:
            out.append(float('inf'))
        else:
            out.append(o / d)
    return out
def color(r, kind):
    # rr: white at 1, green at >= 2.  best: red below 1, white at 1, green above 1.1
    import math
    if kind == 'rr':
        t = max(0.0, min(1.0, (min(r, 2.5) - 1.0) / 1.0))
        return f'rgb({int(255 - 155*t)},{int(255 - 40*t)},{int(255 - 155*t)})'
    if r < 1:
        t = max(0.0, min(1.0, (1 - r) / 0.15))
        return f'rgb(255,{int(255 - 120*t)},{int(255 - 120*t)})'
    t = max(0.0, min(1.0, (min(r, 1.3) - 1) / 0.3))
    return f'rgb({int(255 - 155*t)},{int(255 - 40*t)},{int(255 - 155*t)})'
cw, ch, left, top = 120, 44, 70, 60
panels = [(k, l) for k in ('rr', 'best') for l in levels]
pw = left + cw * len(sigmas) + 30
width = pw * 2
height = (top + ch * len(alphas) + 50) * 2
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
       f'<rect width="{width}" height="{height}" fill="white"/>']
for i, (kind, level) in enumerate(panels):
    ox = (i % 2) * pw
    oy = (i // 2) * (top + ch * len(alphas) + 50)
    title = (f'round_robin / default, cost to mean loss {level}' if kind == 'rr'
             else f'best other policy / default, to {level}')
    svg.append(f'<text x="{ox + left}" y="{oy + 20}" font-weight="bold">{title}</text>')
    svg.append(f'<text x="{ox + left}" y="{oy + 38}" fill="#555">min-max over seeds 0, 1, 2 (50 repetitions each)</text>')
    for a_i, alpha in enumerate(alphas):
        y = oy + top + a_i * ch
        svg.append(f'<text x="{ox + left - 8}" y="{y + ch/2 + 4}" text-anchor="end">a={alpha}</text>')
        for s_i, sigma in enumerate(sigmas):
            x = ox + left + s_i * cw
            r = ratios((sigma, alpha), level, kind)
            if r is None:
                svg.append(f'<rect x="{x}" y="{y}" width="{cw}" height="{ch}" fill="#eee" stroke="#999"/>')
                svg.append(f'<text x="{x + cw/2}" y="{y + ch/2 + 4}" text-anchor="middle" fill="#999">not run</text>')
                continue
            lo, hi = min(r), max(r)
            fmt = lambda v: 'inf' if v == float('inf') else f'{v:.2f}'
            svg.append(f'<rect x="{x}" y="{y}" width="{cw}" height="{ch}" fill="{color(lo, kind)}" stroke="#999"/>')
            svg.append(f'<text x="{x + cw/2}" y="{y + ch/2 + 4}" text-anchor="middle">{fmt(lo)}-{fmt(hi)}x</text>')
    for s_i, sigma in enumerate(sigmas):
        svg.append(f'<text x="{ox + left + s_i*cw + cw/2}" y="{oy + top + len(alphas)*ch + 16}" text-anchor="middle">sigma_M={sigma}</text>')
svg.append('</svg>')
open(os.path.join(folder, 'grid.svg'), 'w').write('\n'.join(svg))
print('wrote', os.path.join(folder, 'grid.svg'))
