/* SPDX-License-Identifier: MIT */
/*
 * The code interpreter's kernels: small programs of our own, started inside the sandbox
 * with python3 -c / node -e as long-lived commands (one per context). Each reads one
 * JSON request a line on stdin ({"code", "env"}), runs the code in globals it keeps, and
 * writes JSON lines on stdout in the shapes @e2b/code-interpreter reads:
 *   {"type":"stdout"|"stderr","text"}, {"type":"result","text","is_main_result":true}
 *   (the last expression's value as text/plain), {"type":"error","name","value",
 *   "traceback"}, {"type":"number_of_executions","execution_count"}, then
 *   {"type":"__done__"}, ours, which ends the execution and is not forwarded.
 */
#include "api/e2b/e2b.h"

#include <string.h>

static const char e2b_kernel_py[] =
    "import ast,io,json,os,sys,traceback\n"
    "_o=sys.__stdout__\n"
    "def _e(m):\n"
    " _o.write(json.dumps(m)+'\\n');_o.flush()\n"
    "class _W(io.TextIOBase):\n"
    " def __init__(s,t):s.t=t;s.b=''\n"
    " def writable(s):return True\n"
    " def write(s,x):\n"
    "  s.b+=x;i=s.b.rfind('\\n')+1\n"
    "  if i:_e({'type':s.t,'text':s.b[:i]});s.b=s.b[i:]\n"
    "  return len(x)\n"
    " def flush(s):\n"
    "  if s.b:_e({'type':s.t,'text':s.b});s.b=''\n"
    "_g={'__name__':'__main__'};_n=0\n"
    "for _l in sys.stdin:\n"
    " _r=json.loads(_l);_n+=1;_env=_r.get('env') or {};_old={k:os.environ.get(k) for k in _env}\n"
    " os.environ.update(_env);sys.stdout=_W('stdout');sys.stderr=_W('stderr')\n"
    " try:\n"
    "  _t=ast.parse(_r['code'],'<cell>','exec');_x=None\n"
    "  if _t.body and isinstance(_t.body[-1],ast.Expr):_x=ast.Expression(_t.body.pop().value)\n"
    "  exec(compile(_t,'<cell>','exec'),_g)\n"
    "  if _x is not None:\n"
    "   _v=eval(compile(_x,'<cell>','eval'),_g)\n"
    "   if _v is not None:_e({'type':'result','text':repr(_v),'is_main_result':True})\n"
    " except BaseException as _z:\n"
    "  _e({'type':'error','name':type(_z).__name__,'value':str(_z),"
    "'traceback':''.join(traceback.format_exception(type(_z),_z,_z.__traceback__))})\n"
    " finally:\n"
    "  sys.stdout.flush();sys.stderr.flush();sys.stdout=sys.__stdout__;sys.stderr=sys.__stderr__\n"
    "  for k,v in _old.items():\n"
    "   if v is None:os.environ.pop(k,None)\n"
    "   else:os.environ[k]=v\n"
    " _e({'type':'number_of_executions','execution_count':_n});_e({'type':'__done__'})\n";

static const char e2b_kernel_js[] =
    "const vm=require('vm'),util=require('util');"
    "const out=(m)=>process.stdout.write(JSON.stringify(m)+'\\n');"
    "const fmt=(a)=>a.map((x)=>typeof x==='string'?x:util.inspect(x)).join(' ')+'\\n';"
    "const con={log:(...a)=>out({type:'stdout',text:fmt(a)}),"
    "info:(...a)=>out({type:'stdout',text:fmt(a)}),"
    "error:(...a)=>out({type:'stderr',text:fmt(a)}),"
    "warn:(...a)=>out({type:'stderr',text:fmt(a)})};"
    "const ctx=vm.createContext({console:con,require,process,Buffer,setTimeout,"
    "clearTimeout,setInterval,clearInterval});"
    "let n=0,chain=Promise.resolve();"
    "require('readline').createInterface({input:process.stdin}).on('line',(l)=>{"
    "chain=chain.then(async()=>{const r=JSON.parse(l);n++;"
    "const old={};for(const k of Object.keys(r.env||{})){old[k]=process.env[k];"
    "process.env[k]=r.env[k];}"
    "try{let v=vm.runInContext(r.code,ctx,{filename:'<cell>'});"
    "if(v&&typeof v.then==='function')v=await v;"
    "if(v!==undefined)out({type:'result',text:util.inspect(v),is_main_result:true});}"
    "catch(e){out({type:'error',name:(e&&e.name)||'Error',value:(e&&e.message)||String(e),"
    "traceback:(e&&e.stack)||String(e)});}"
    "for(const k of Object.keys(old)){if(old[k]===undefined)delete process.env[k];"
    "else process.env[k]=old[k];}"
    "out({type:'number_of_executions',execution_count:n});out({type:'__done__'});});});";

int e2b_kernel(const char *language, const char **cmd, const char **flag, const char **program)
{
	if (!language || !language[0] || strcmp(language, "python") == 0) {
		*cmd = "python3", *flag = "-c", *program = e2b_kernel_py;
		return 0;
	}
	if (strcmp(language, "javascript") == 0 || strcmp(language, "js") == 0) {
		*cmd = "node", *flag = "-e", *program = e2b_kernel_js;
		return 0;
	}
	return -1;
}
